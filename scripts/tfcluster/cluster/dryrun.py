"""The dry run: what a run would do, as text, from its plan; it reads the Compose files and .env
and calls nothing. Its commands are the plan's own steps (tfcluster/cluster/steps.py), so what it
shows is what the run does.
"""

import os
import shlex

from tfcluster import paths
from tfcluster.cluster import build, composefiles, devmode, slowdown, steps
from tfcluster.cluster.plan import (
    BAKED_FILE,
    BASE_FILE,
    DATA_FILE,
    ENV_FILE,
    NETWORK_FILE,
    OWN_TRAINER_FILE,
    PROJECT_FILE,
    RECOVERY_FILE,
    WORKERS_FILE,
    Plan,
)
from tfcluster.cluster.steps import SETUP
from tfcluster.project import baking, layout
from tfcluster.project.options import Project
from trainer.contract.faults import parse as parse_faults
from trainer.contract.links import parse as parse_links
from trainer.contract.shaping import PROFILE_NAMES


def describe(plan: Plan, environ) -> str:
    """What the run would do, as text; reads the Compose files and .env, and calls nothing."""
    environment = steps.dry_environment(plan)
    variables = steps.dry_variables(plan, environ)
    # The files the run would write are not there yet (or are an earlier run's).
    written = plan.written()
    texts = {name: _read(name) for name in plan.files if name not in written}
    workers_file = plan.generated(WORKERS_FILE)
    override = written[workers_file]
    if override is not None:
        texts[workers_file] = override
    if plan.name_given:
        project_source = "--name"
    else:
        project_source = f"COMPOSE_PROJECT_NAME, else compose.yaml's; {plan.name}-2, -3... while another run holds it"
    image = composefiles.interpolate(composefiles.first_image(texts[BASE_FILE]), variables)
    shaper_image = composefiles.interpolate(
        composefiles.first_image((paths.ROOT / NETWORK_FILE).read_text(encoding="utf-8")), variables
    )
    wheelhouses = "docker/wheels and docker/extra-wheels" if variables.get("EXTRA_REQUIREMENTS") else "docker/wheels"

    lines = [
        f"scripts/run {shlex.join(arguments_of(plan))}: what it would do; nothing is set up, built, written or "
        "started.",
        "",
        f"compose files  {':'.join(plan.files)} (COMPOSE_FILE)",
        f"project        {plan.name} ({project_source}), its files in {plan.folder}/",
        f"set-up         {shlex.join([SETUP, *plan.setup_options()])}: Compose v2 if missing, the base image, "
        f"{wheelhouses}, then",
        f"               a build of {image} (worker-0)"
        + (f" and {shaper_image} (shaper-0)" if plan.profile else "")
        + (", unless current (--dev: its code aside)" if plan.dev else ", unless current"),
    ]
    rendering = shlex.join(["scripts/workers.py", str(plan.worker_count), *workers_options(plan)])
    if plan.renders_workers:
        lines.append(f"rendered       {workers_file}, by {rendering}")
    if plan.trainer_script:
        where = workers_file if plan.renders_workers else OWN_TRAINER_FILE
        lines.append(f"trainer        {plan.trainer_script}, read-only at /user/train.py on every worker ({where})")
    elif plan.project:
        lines += describe_project(plan, environ, image)
    else:
        lines.append("trainer        the built-in one, python -m trainer.training")
    lines += _options_lines(plan, texts, variables)

    lines += _workers_lines(plan, texts, variables)

    lines += ["", "commands, from the project's root, with the COMPOSE_FILE above:"]
    lines += [f"  {line}" for step in plan.steps for line in step.lines(plan, environ)]
    lines.append("exit status: the verifier's (scripts/run --help)")

    lines += _model_lines(plan, environment, override, rendering)
    return "\n".join(lines) + "\n"


def workers_options(plan: Plan) -> list[str]:
    """scripts/workers.py's options for the run's compose.workers.yaml, as one would render it by hand."""
    chosen = [
        ("--own-trainer", plan.trainer_script is not None),
        ("--project", plan.project is not None),
        ("--baked", plan.bakes),
        ("--data", plan.has_data),
        ("--network", bool(plan.profile)),
    ]
    return [option for option, wanted in chosen if wanted]


def _options_lines(plan: Plan, texts: dict[str, str], variables: dict[str, str]) -> list[str]:
    """The dry run's lines on the code, the network, recovery, CPUs, the verdict and the report."""
    lines = []
    waited_for = plan.names + (["the keeper"] if plan.recover else [])
    if plan.dev:
        mounted = ", ".join(devmode.services(plan.names, plan.recover))
        lines.append(f"code           this checkout's trainer/, read-only at {devmode.TARGET} on {mounted} (--dev)")
    if plan.profile:
        shapers = ", ".join(f"shaper-{index}" for index in range(plan.worker_count))
        lines.append(f"network        profile {plan.profile}, applied and measured by {shapers}")
        lines += link_lines(plan)
        for fault in parse_faults("; ".join(plan.faults)):
            by = ", ".join(f"shaper-{name.removeprefix('worker-')}" for name in fault.ends(plan.names))
            lines.append(f"fault          {fault.describe()}, by {by}")
    else:
        lines.append("network        not shaped")
    if plan.recover:
        limit = composefiles.interpolate(composefiles.declared(texts[RECOVERY_FILE], "TF_RESTART_LIMIT"), variables)
        shapers = " (its shapers after the workers)" if plan.profile else ""
        lines.append(
            f"recovery       the keeper restarts the whole cluster{shapers} after a failure, {limit} times at most"
        )
        lines.append(f"               (TF_RESTART_LIMIT={limit}, compose.recovery.yaml)")
    else:
        lines.append("recovery       none: a failure ends the run")
    lines += describe_slowed(plan, composefiles.interpolate(composefiles.declared(texts[BASE_FILE], "cpus"), variables))
    lines.append(f"verdict        the verifier's, once it has heard from {', '.join(waited_for)}")
    if plan.junit:
        lines.append(f"report         the verdict as JUnit XML in {plan.junit}, whatever the run's end (--junit)")
    return lines


def _workers_lines(plan: Plan, texts: dict[str, str], variables: dict[str, str]) -> list[str]:
    """The dry run's table of the workers, and the settings every worker gets."""
    hosts = ",".join(plan.names)
    lines = []
    width = max(len(name) for name in plan.names) + 2
    lines += ["", f"{'workers':<{width + 2}}TF_TASK_INDEX  TF_WORKER_HOSTS"]
    lines += [f"  {name:<{width}}{index:<15}{hosts}" for index, name in enumerate(plan.names)]
    lines.append("settings of every worker (compose.yaml's defaults, unless your environment or .env sets them):")
    lines += [f"  {key}={shlex.quote(value)}" for key, value in worker_settings(plan, texts, variables).items()]
    return lines


def _model_lines(plan: Plan, environment: dict[str, str], override: str | None, rendering: str) -> list[str]:
    """How to see the whole model Compose would run."""
    lines = []
    lines += ["", "The whole model Compose would run (this calls Docker, but builds and starts nothing):"]
    if override is not None:
        lines.append(f"  python3 {rendering} --output {plan.generated(WORKERS_FILE)}")
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in environment.items())
    lines.append(f"  {assignments} docker compose config")
    if plan.project:
        lines.append(f"  (which reads {plan.generated(ENV_FILE)} as the last run wrote it, if any)")
    if plan.slowed:
        lines.append(f"  (once a run has written {plan.generated(slowdown.SLOW_FILE)})")
    return lines


def describe_slowed(plan: Plan, cpus: str) -> list[str]:
    """The dry run's line on the workers' CPU limits: compose.yaml's, and --slow's."""
    if not plan.slowed:
        return [f"cpus           every worker: {cpus} (TF_WORKER_CPUS); --slow NAME=CPUS limits one"]
    limits = ", ".join(f"{name}: {slowdown.cpus_text(limit)}" for name, limit in plan.slowed.items())
    written = plan.generated(slowdown.SLOW_FILE)
    return [f"cpus           {limits} (--slow, {written}); every other worker: {cpus} (TF_WORKER_CPUS)"]


def describe_project(plan: Plan, environ, base: str) -> list[str]:
    """The dry run's lines on your project: command, folders, variables, requirements and images."""
    project = plan.project
    workers_file = plan.generated(WORKERS_FILE)
    where = workers_file if plan.renders_workers else BAKED_FILE if plan.bakes else PROJECT_FILE
    mounts = workers_file if plan.renders_workers else DATA_FILE
    lines = [f"trainer        your command, in /project on every worker: {shlex.join(project.command)} ({where})"]
    if project.bake is None:
        lines.append(f"your project   {project.directory}, read-only at /project (TFCLUSTER_PROJECT_DIR=/project)")
    else:
        lines.append(
            f"your project   {project.directory}, copied into the image at /project, not mounted "
            "(TFCLUSTER_PROJECT_DIR=/project)"
        )
        lines += describe_bake(project, base)
    if project.data:
        lines.append(f"your data      {project.data}, read-only at /data (TFCLUSTER_DATA_DIR=/data, {mounts})")
    else:
        lines.append("your data      none (--data DIR mounts a folder at /data)")
    if project.variables:
        assignments = [f"{name}={shlex.quote(value)}" for name, value in sorted(project.variables.items())]
        lines.append(f"your variables {assignments[0]}")
        lines += [f"               {assignment}" for assignment in assignments[1:]]
        lines.append(
            f"               through {plan.generated(ENV_FILE)} (env_file), with "
            f"{layout.USER_ENVIRONMENT_LIST}={','.join(sorted(project.variables))}"
        )
    else:
        lines.append(f"your variables none (--env, --env-file); {plan.generated(ENV_FILE)} is written with none")
    if project.requirements:
        image = project.image or environ.get("TFCLUSTER_IMAGE")
        source = "its name, from requirements" if project.image else "yours"
        lines += [
            f"requirements   {' '.join(project.requirements)} (EXTRA_REQUIREMENTS)",
            f"               from {project.requirements_file}, held to docker/requirements.txt's pins,",
            f"               in the image {image} (TFCLUSTER_IMAGE: {source})",
        ]
    else:
        lines.append(f"requirements   none (no {layout.REQUIREMENTS_FILE} in the project, no --requirements)")
    return lines


def describe_bake(project: Project, base: str) -> list[str]:
    """The dry run's lines on the baked image: its name, what it is built on, what goes into it."""
    if project.tag is not None:
        lines = [f"baked image    {project.tag} (--tag), {build.DOCKERFILE} on {base}"]
    else:
        lines = [
            f"baked image    {build.UNKNOWN_TAG}, HASH after what is sent and the id of {base}",
            f"               ({build.DOCKERFILE} on it), known once the set-up has built that",
        ]
    left_out = ["__pycache__", ".git", "virtual environments"]
    if project.bake.dockerignore:
        left_out.insert(0, f"what {baking.DOCKERIGNORE} names")
    if project.data and project.data.startswith(project.directory + os.sep):
        left_out.append(f"{os.path.relpath(project.data, project.directory)}/ (--data: mounted instead)")
    lines.append(f"               sent: {project.bake.summary()}")
    lines.append(f"               left out: {', '.join(left_out)}")
    return lines


def arguments_of(plan: Plan) -> list[str]:
    """The options that ask for this plan, in the order of --help."""
    arguments = []
    if plan.renders_workers:
        arguments += ["--workers", str(plan.worker_count)]
    if plan.recover:
        arguments.append("--recover")
    if plan.profile:
        arguments += ["--network", plan.profile]
    for clause in plan.faults:
        arguments += ["--fault", clause]
    for clause in plan.links:
        arguments += ["--link", clause]
    if plan.chief:
        arguments.append("--chief")
    arguments += slowdown.arguments(plan.slowed)
    if plan.dev:
        arguments.append("--dev")
    if plan.junit:
        arguments += ["--junit", plan.junit]
    if plan.name_given:
        arguments += ["--name", plan.name]
    if plan.project:
        arguments += plan.project.arguments
    return [*arguments, "--dry-run"]


def worker_settings(plan: Plan, texts: dict[str, str], variables: dict[str, str]) -> dict[str, str]:
    """The TF_* and TRAIN_* settings every worker gets, but its index and host list (shown apart).

    From compose.yaml's two blocks that every worker merges (`&cluster`, `&worker-environment`),
    then what compose.workers.yaml adds for all; interpolated as Compose would.
    """
    declarations = composefiles.anchored_block(texts[BASE_FILE], "cluster") + composefiles.anchored_block(
        texts[BASE_FILE], "worker-environment"
    )
    declarations += texts.get(plan.generated(WORKERS_FILE), "")
    shown_apart = {"TF_TASK_INDEX", "TF_WORKER_HOSTS"}
    settings = {
        key: composefiles.interpolate(composefiles.unquote(value), variables)
        for key, value in composefiles.SETTING.findall(declarations)
        if key not in shown_apart
    }
    if plan.profile:
        settings["TF_NETWORK_PROFILE"] = plan.profile
    return settings


def _read(name: str) -> str:
    return (paths.ROOT / name).read_text(encoding="utf-8")


def link_lines(plan) -> list[str]:
    """--link's clauses, and the profile of every direction they give: each row's worker sending."""
    if not plan.links:
        return []
    links = parse_links("; ".join(plan.links), PROFILE_NAMES)
    names = plan.names
    rows = [["from \\ to", *names]]
    rows += [
        [
            sender,
            *("-" if sender == receiver else links.profile_of(sender, receiver, plan.profile) for receiver in names),
        ]
        for sender in names
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    table = [
        "               " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return [*(f"link           {clause}" for clause in plan.links), *table]

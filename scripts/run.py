#!/usr/bin/env python3
"""The main job, behind scripts/run: set up what is missing, train the cluster, print the verdict.

Everything is parsed and checked before anything starts, so that a typo costs nothing: the
arguments, how they combine, TRAINER_SCRIPT, and with --project your command, variables and
requirements (scripts/training_project.py). Then, from this repository's root:

  1. compose.workers.yaml, for a number of workers other than compose.yaml's two (scripts/workers.py),
     and with --project .tfcluster/env, your program's environment
  2. scripts/setup (Compose v2, base images, wheelhouse, images; quick when nothing is missing)
  3. with --bake, docker build of docker/Dockerfile.project: your project in an image of its own
  4. docker compose down, so that the run starts clean
  5. docker compose up ... --exit-code-from verifier verifier: the workers' logs and the verdict
  6. docker compose stop, for a worker that outlives the verdict

with COMPOSE_FILE naming the files that make up this cluster. The exit status is the verifier's.
Host only and standard library only: it must run on a machine with nothing but python3 and Docker.
"""

import argparse
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import devmode  # scripts/devmode.py: Python puts this file's folder on the path.
import hostpaths  # scripts/hostpaths.py, the same way.
import junit_report  # scripts/junit_report.py, the same way.
import slowdown  # scripts/slowdown.py, the same way.
import training_project  # scripts/training_project.py, the same way.
import workers  # scripts/workers.py, the same way.
from commandline import BAD_ARGUMENTS, HELP_WIDTH, Parser, one_of, whole_number  # scripts/commandline.py, the same way.
from training_project import Refusal

ROOT = Path(__file__).resolve().parent.parent

PROFILES = ("lan", "wan", "lossy", "thin")
BASE_FILE = workers.BASE_FILE
OWN_TRAINER_FILE = "compose.byo.yaml"
PROJECT_FILE = "compose.project.yaml"
BAKED_FILE = "compose.baked.yaml"
DATA_FILE = "compose.data.yaml"
BAKE_DOCKERFILE = "docker/Dockerfile.project"
# docker/Dockerfile.project's label, which tells a baked image from the harness's own.
BAKED_TITLE = "org.opencontainers.image.title=tfcluster-baked"
# What the dry run shows for the baked image's name before the set-up has built the image it is
# named after (with --tag, the name itself).
UNKNOWN_BAKED_TAG = f"{training_project.BAKED_REPOSITORY}:HASH"
# Your program's environment, written for compose.project.yaml's env_file (git ignores it).
ENV_FILE = ".tfcluster/env"
WORKERS_FILE = "compose.workers.yaml"
RECOVERY_FILE = "compose.recovery.yaml"
NETWORK_FILE = "compose.network.yaml"
SETUP = "scripts/setup"
# compose.yaml's image when TFCLUSTER_IMAGE is not set (the dry run reads it from the file).
DEFAULT_IMAGE = "tfcluster:latest"
# The Compose commands of a run, in order. `down` first: an earlier run's containers (their logs)
# and volumes would otherwise be reused, volumes with the options they were created with.
DOWN = ("docker", "compose", "down", "--volumes", "--remove-orphans", "--timeout", "1")
# Workers' logs and the verdict together; only the verifier's exit ends the run (a plain
# `--exit-code-from` without the service name would stop every worker when the first one exits).
UP = (
    "docker",
    "compose",
    "up",
    "--remove-orphans",
    "--attach-dependencies",
    "--exit-code-from",
    "verifier",
    "verifier",
)
# A worker can outlive the verdict (for example one still waiting for a peer that failed).
STOP = ("docker", "compose", "stop", "--timeout", "5")

DESCRIPTION = """\
Sets up what is missing (scripts/setup), trains the cluster and prints the verdict: every worker
is a container of its own on a private network, and the verifier checks that all of them finished
the same synchronized training. Arguments are checked before anything starts."""


def _reserved_names() -> str:
    """The epilog's paragraph on the names --env may not set, made from training_project's lists."""
    harness = (*training_project.HARNESS_NAMES, *(f"{prefix}*" for prefix in training_project.HARNESS_PREFIXES))
    settings = (*(f"{prefix}*" for prefix in training_project.SETTING_PREFIXES), *training_project.SETTING_NAMES)
    text = (
        f"--env and --env-file may not set the harness's own names: {', '.join(harness)}; nor its "
        f"settings, which are set in scripts/run's environment instead: {', '.join(settings)}."
    )
    return textwrap.fill(
        text, HELP_WIDTH, initial_indent="  ", subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )


RESERVED_NAMES = _reserved_names()

EPILOG = f"""\
your project (--project DIR; docs/bring-your-own.md):
  every worker runs CMD in /project, DIR mounted read-only, with TF_CONFIG set by the harness;
  a command that runs python checks here first that its script (a path, from DIR) or module
  (-m PKG.MOD: DIR/PKG/MOD.py or DIR/PKG/MOD/__main__.py; or trainer.*, the image's) exists.
{RESERVED_NAMES}
  Requirements are pip specifiers, one a line (no options, URLs or paths), held to the image's pins;
  they are installed in an image of their own, {training_project.IMAGE_REPOSITORY}:HASH.
  --bake copies DIR into an image of its own instead of mounting it (docker/Dockerfile.project, on
  the image above or tfcluster:latest), for a Docker that cannot see this machine's folders (a CI
  `container:` job). Left out: what DIR/.dockerignore names, __pycache__, .git, virtual
  environments and the --data folder (data stays mounted). It is named {training_project.BAKED_REPOSITORY}:HASH after
  the files and the base image's id (a run removes the folder's superseded ones), or --tag NAME.

environment:
  TRAINER_SCRIPT        your own training script, run by every worker instead of the built-in
                        trainer (compose.byo.yaml); a path from where you are (default: unset);
                        the one-file form of --project, not with it
  EXTRA_REQUIREMENTS    your trainer's own packages, installed in the image (scripts/setup --help);
                        with --project, its requirements file instead
  TFCLUSTER_IMAGE       the image to build and run (default: tfcluster:latest, or with your
                        project's requirements {training_project.IMAGE_REPOSITORY}:HASH)
  TRAIN_*, TF_*         the training and cluster settings, e.g. TRAIN_EPOCHS=5 (docs/settings.md)
  COMPOSE_PROJECT_NAME  the Compose project to run as (default: compose.yaml's name, tfcluster)

examples:
  scripts/run                          # the two workers of compose.yaml
  scripts/run --workers 4 --recover    # four workers; a failure restarts them all
  scripts/run --slow worker-1=0.25     # worker-1 on a quarter of a core: the verdict names the straggler
  scripts/run --dev                    # after editing trainer/: its code mounted, no rebuild
  scripts/run --project examples/keras-fit --env TF_USE_LEGACY_KERAS=1   # your project, python train.py
  scripts/run --project ~/model --command "python -m model.train --fast" --data ~/datasets/model \\
    --env-file ~/model/cluster.env --workers 3 --dry-run      # what it would do, not done
  scripts/run --project examples/custom-loop --bake    # the project in an image, not mounted (CI)
  TRAINER_SCRIPT=./train.py scripts/run --network wan   # one script of your own, on shaped links

exit status (the verifier's, once the cluster has run):
  0    ok: every worker exited 0, trained with all its peers and agrees
  2    config error: a bad argument or setting, named in one line (nothing was started), or
       scripts/setup could not proceed (Docker missing or not running, a requirement that
       conflicts with the image's pins or cannot be downloaded)
  7    verification failed: the verifier's table says why
  143  terminated: the verifier was stopped before a verdict
  any other: set-up, Docker or Compose failed, and said why

Worker names are worker-0 to worker-N-1 (worker-0 is the chief). At most {workers.MAX_WORKERS} workers."""


def parser() -> Parser:
    parser = Parser(
        "run",
        prog="scripts/run",
        description=DESCRIPTION,
        epilog=EPILOG,
        value_names={
            "--workers": "a number",
            "--network": "a profile",
            "--slow": "NAME=CPUS",
            "--project": "a folder",
            "--command": "a command",
            "--data": "a folder",
            "--env": "NAME=VALUE",
            "--env-file": "a file",
            "--requirements": "a file",
            "--tag": "an image name",
            "--junit": "a file",
        },
    )
    parser.add_argument(
        "--workers",
        type=whole_number(1, workers.MAX_WORKERS),
        default=workers.DEFAULT_WORKERS,
        metavar="N",
        help=f"how many workers, 1 to {workers.MAX_WORKERS} (default: {workers.DEFAULT_WORKERS}, compose.yaml's "
        "own); another number is rendered into compose.workers.yaml by scripts/workers.py",
    )
    parser.add_argument(
        "--recover",
        action="store_true",
        help="add the keeper (compose.recovery.yaml): after a failure it restarts the whole cluster, "
        "which resumes from the last checkpoint (default: off)",
    )
    parser.add_argument(
        "--network",
        type=one_of(*PROFILES),
        metavar="PROFILE",
        help=f"shape the links between the two workers: {', '.join(PROFILES[:-1])} or {PROFILES[-1]} "
        "(compose.network.yaml; default: none, unshaped); not with --workers or --recover",
    )
    parser.add_argument(
        "--slow",
        action="append",
        type=slowdown.assignments,
        default=[],
        metavar="NAME=CPUS",
        help="limit worker NAME to CPUS cores (a positive number, at most the machine's), to see a "
        f"straggler; repeatable or comma-separated (written to {slowdown.SLOW_FILE}; default: every "
        "worker gets TF_WORKER_CPUS)",
    )
    parser.add_argument(
        "--dev",
        action="store_true",
        help="development mode: this checkout's trainer/ mounted read-only over the image's, so that an "
        f"edit of the launcher, verifier or built-in trainer runs with no image build ({devmode.DEV_FILE}; "
        "the image is built only when its dependencies change; default: off, the image's code)",
    )
    parser.add_argument(
        "--project",
        metavar="DIR",
        help="your training project, from where you are: mounted read-only at /project on every worker, "
        "which runs your command there (compose.project.yaml; default: none, the built-in trainer)",
    )
    parser.add_argument(
        "--command",
        metavar="CMD",
        help="with --project: the command every worker runs in /project, split as a shell would "
        "(default: python train.py, if DIR has train.py)",
    )
    parser.add_argument(
        "--data",
        metavar="DIR",
        help="with --project: a folder mounted read-only at /data on every worker, which finds it in "
        "TFCLUSTER_DATA_DIR (compose.data.yaml; default: none)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --project: a variable of your program's environment on every worker; repeatable, "
        "and wins over --env-file (default: none)",
    )
    parser.add_argument(
        "--env-file",
        action="append",
        default=[],
        metavar="FILE",
        help="with --project: variables from a file in Compose's env_file syntax (NAME=VALUE lines, "
        "# comments); repeatable, a later file winning (default: none)",
    )
    parser.add_argument(
        "--requirements",
        metavar="FILE",
        help="with --project: your packages, pip requirement specifiers one a line, installed in the "
        "image (default: DIR/requirements.txt, if there is one)",
    )
    parser.add_argument(
        "--bake",
        action="store_true",
        help="with --project: copy DIR into an image of its own (docker/Dockerfile.project) and run that, "
        "with no bind mount of DIR, for a Docker that cannot see this machine's folders (compose.baked.yaml; "
        "default: off, DIR is mounted)",
    )
    parser.add_argument(
        "--tag",
        metavar="NAME",
        help=f"with --bake: the baked image's name (default: {training_project.BAKED_REPOSITORY}:HASH, "
        "12 hex digits of a digest of the files sent and the base image's id)",
    )
    parser.add_argument(
        "--junit",
        metavar="FILE",
        help="also write the verdict as JUnit XML to FILE, from where you are, whatever the run's end: one "
        "case per worker and one for their agreement, from their logs and exit codes; a run that ends "
        "before its workers run, or fails where their logs pass, fails a case of its own (default: none)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be done (the Compose files, the project, each worker's settings, what "
        "would be built) and exit 0; nothing is set up, built, written or started (default: off)",
    )
    return parser


@dataclass(frozen=True)
class Project:
    """Your training project (--project), checked: what every worker gets of it."""

    # The options as given, for the dry run's first line.
    arguments: tuple[str, ...]
    # Absolute, since Compose resolves a relative one from its project, not from where the user is.
    directory: str
    command: tuple[str, ...]
    data: str | None
    # Yours, merged: the env files in order, then --env.
    variables: dict[str, str]
    # Normalized specifiers, and the file they come from.
    requirements: tuple[str, ...]
    requirements_file: str | None
    # The image to build and run, when it is this script's to choose (your requirements' own).
    image: str | None
    # With --bake: what goes into the baked image, and its name if you gave one (--tag).
    bake: training_project.BakeContext | None = None
    tag: str | None = None


@dataclass(frozen=True)
class Plan:
    """One run, checked: what it is made of, before anything is done."""

    worker_count: int
    recover: bool
    profile: str | None
    # Absolute, since Compose resolves a relative one from the project, not from where the user is.
    trainer_script: str | None
    project: Project | None = None
    # --slow: each slowed worker's CPU limit, by name.
    slowed: dict[str, float] = field(default_factory=dict)
    # --dev: this checkout's trainer/ mounted over the image's.
    dev: bool = False
    # --junit: where the verdict goes as JUnit XML (absolute: the run works from the project's root).
    junit: str | None = None

    @property
    def names(self) -> list[str]:
        return workers.worker_names(self.worker_count)

    @property
    def renders_workers(self) -> bool:
        return self.worker_count != workers.DEFAULT_WORKERS

    @property
    def has_data(self) -> bool:
        return self.project is not None and self.project.data is not None

    @property
    def bakes(self) -> bool:
        return self.project is not None and self.project.bake is not None

    def workers_options(self) -> list[str]:
        """scripts/workers.py's options for this run's compose.workers.yaml."""
        chosen = [
            ("--own-trainer", self.trainer_script is not None),
            ("--project", self.project is not None),
            ("--baked", self.bakes),
            ("--data", self.has_data),
        ]
        return [option for option, wanted in chosen if wanted]

    def override(self) -> str | None:
        """compose.workers.yaml's text, for a number of workers other than compose.yaml's."""
        if not self.renders_workers:
            return None
        return workers.render(
            self.worker_count,
            own_trainer=self.trainer_script is not None,
            project=self.project is not None,
            baked=self.bakes,
            data=self.has_data,
        )

    @property
    def files(self) -> list[str]:
        # compose.workers.yaml brings your own trainer or project itself (an override cannot extend
        # a service of another override); with compose.yaml's two, compose.byo.yaml or
        # compose.project.yaml, or compose.baked.yaml (and compose.data.yaml) do.
        if self.renders_workers:
            files = [BASE_FILE, WORKERS_FILE]
        elif self.trainer_script:
            files = [BASE_FILE, OWN_TRAINER_FILE]
        elif self.project:
            project_file = BAKED_FILE if self.bakes else PROJECT_FILE
            files = [BASE_FILE, project_file, *([DATA_FILE] if self.has_data else [])]
        else:
            files = [BASE_FILE]
        if self.recover:
            files.append(RECOVERY_FILE)
        if self.profile:
            files.append(NETWORK_FILE)
        if self.dev:
            files.append(devmode.DEV_FILE)
        if self.slowed:
            # Last, so that its limits win over every file before it.
            files.append(slowdown.SLOW_FILE)
        return files

    def bind_sources(self) -> dict[str, str]:
        """What the workers get bind-mounted from this machine, by the option or variable that names it."""
        sources = {}
        if self.trainer_script:
            sources["TRAINER_SCRIPT"] = self.trainer_script
        if self.project and not self.bakes:
            sources["--project"] = self.project.directory
        if self.project and self.project.data:
            sources["--data"] = self.project.data
        if self.dev:
            sources["--dev"] = str(ROOT / "trainer")
        return sources

    def written(self) -> dict[str, str | None]:
        """The files a run writes before its set-up, by path from the root, and their text."""
        return {
            WORKERS_FILE: self.override(),
            ENV_FILE: training_project.env_file_text(self.project.variables) if self.project else None,
            slowdown.SLOW_FILE: slowdown.render(self.slowed) if self.slowed else None,
            devmode.DEV_FILE: devmode.render(devmode.services(self.names, self.recover), ROOT) if self.dev else None,
        }

    def environment(self, baked_image: str | None = None) -> dict[str, str]:
        """What the set-up and Compose get on top of the user's environment.

        With --bake, `baked_image` is the image's name once it is known (after the set-up, unless
        --tag gave it).
        """
        # Set in every case, so that a COMPOSE_FILE exported for an earlier cluster is not what runs.
        environment = {"COMPOSE_FILE": ":".join(self.files)}
        if self.trainer_script:
            environment["TRAINER_SCRIPT"] = self.trainer_script
        if self.project:
            project = self.project
            if project.bake is not None:
                # No TFCLUSTER_PROJECT: nothing is mounted, so no host folder is named at all. The
                # image's name, when it is not yet known, matters to nothing before `docker build`.
                if baked_image or project.tag:
                    environment["TFCLUSTER_BAKED_IMAGE"] = baked_image or project.tag
            else:
                environment["TFCLUSTER_PROJECT"] = project.directory
            # Compose splits it again, as a shell would; joined by shlex, every word survives that.
            environment["TFCLUSTER_COMMAND"] = shlex.join(project.command)
            environment["TFCLUSTER_ENV_FILE"] = str(ROOT / ENV_FILE)
            if project.data:
                environment["TFCLUSTER_DATA"] = project.data
            if project.requirements:
                environment["EXTRA_REQUIREMENTS"] = " ".join(project.requirements)
            if project.image:
                environment["TFCLUSTER_IMAGE"] = project.image
        if self.profile:
            environment["TF_NETWORK_PROFILE"] = self.profile
        return environment


def make_plan(arguments: argparse.Namespace, environ, fail: Callable[[str], NoReturn]) -> Plan:
    """The run the arguments ask for, or `fail` (one line, exit 2) if they cannot go together."""
    if arguments.network:
        if arguments.workers != workers.DEFAULT_WORKERS:
            fail(f"--network shapes the two workers of compose.yaml; not with --workers {arguments.workers}")
        # A shaper lives in its worker's network namespace, which a restarted worker does not keep.
        if arguments.recover:
            fail("--network and --recover do not go together (a restarted worker loses its shaper)")
    trainer_script = environ.get("TRAINER_SCRIPT") or None
    if trainer_script:
        if arguments.project is not None:
            fail("--project and TRAINER_SCRIPT do not go together (TRAINER_SCRIPT is the one-file form of --project)")
        # From where the user is, not from the project, which Compose resolves paths from.
        if not os.path.isfile(trainer_script):
            fail(f"TRAINER_SCRIPT {trainer_script!r} is not a file")
        trainer_script = os.path.realpath(trainer_script)
    if arguments.tag is not None and not arguments.bake:
        fail("--tag goes with --bake (the name of the image it builds)")
    try:
        slowed = slowdown.check(arguments.slow, workers.worker_names(arguments.workers))
    except ValueError as error:
        fail(str(error))
    project = None
    try:
        project = make_project(arguments, environ)
    except Refusal as refusal:
        fail(str(refusal))
    junit = os.path.abspath(arguments.junit) if arguments.junit else None
    # Checked now, so that a report that cannot be written costs no run (its folder is made if missing).
    if junit and os.path.isdir(junit):
        fail(f"--junit {arguments.junit} is a folder; give a file name, such as verdict.xml")
    if junit and not writable_folder(os.path.dirname(junit)):
        fail(f"--junit {arguments.junit}: {os.path.dirname(junit)} cannot be made or written")
    return Plan(
        arguments.workers, arguments.recover, arguments.network, trainer_script, project, slowed, arguments.dev, junit
    )


def writable_folder(path: str) -> bool:
    """Whether `path` is a folder that can be written, or can be made: its nearest existing ancestor can be."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return os.path.isdir(path) and os.access(path, os.W_OK)


# The options that shape your project, which mean nothing without one.
PROJECT_OPTIONS = ("command", "data", "env", "env_file", "requirements", "bake")


def make_project(arguments: argparse.Namespace, environ) -> Project | None:
    """Your project, checked on the host as far as it can be; raises Refusal."""
    if arguments.project is None:
        for option in PROJECT_OPTIONS:
            if getattr(arguments, option):
                raise Refusal(f"--{option.replace('_', '-')} goes with --project DIR (your training project)")
        return None
    shown = arguments.project
    if not os.path.isdir(shown):
        raise Refusal(f"--project {shown!r} is not a folder")
    directory = os.path.realpath(shown)
    data = None
    if arguments.data is not None:
        if not os.path.isdir(arguments.data):
            raise Refusal(f"--data {arguments.data!r} is not a folder")
        data = os.path.realpath(arguments.data)
    if arguments.command is None:
        if not os.path.isfile(os.path.join(directory, training_project.DEFAULT_SCRIPT)):
            raise Refusal(f"--project {shown!r} has no {training_project.DEFAULT_SCRIPT}: give --command")
        command = list(training_project.DEFAULT_COMMAND)
    else:
        command = training_project.split_command(arguments.command)
        training_project.check_command(command, training_project.Mounts(directory, data))
    variables = training_project.merge(
        *(training_project.parse_env_file(path, environ) for path in arguments.env_file),
        [training_project.parse_assignment(text) for text in arguments.env],
    )
    # Checked now, so that a value Compose's env file cannot hold is refused before anything is done.
    training_project.env_file_text(variables)
    requirements_file = arguments.requirements
    if requirements_file is None and os.path.isfile(os.path.join(shown, training_project.REQUIREMENTS_FILE)):
        requirements_file = os.path.join(shown, training_project.REQUIREMENTS_FILE)
    requirements: list[str] = []
    if requirements_file is not None:
        if arguments.requirements is not None and not os.path.isfile(requirements_file):
            raise Refusal(f"--requirements {requirements_file!r} is not a file")
        requirements, provided = training_project.parse_requirements(requirements_file)
        if provided:
            # Said, not silent: the project asked for them, and gets the image's own.
            print(
                f"run | {requirements_file}: {', '.join(provided)}: the image's own, not installed again",
                file=sys.stderr,
            )
    if requirements and environ.get("EXTRA_REQUIREMENTS"):
        raise Refusal(
            f"EXTRA_REQUIREMENTS and {requirements_file} do not go together: list every requirement in the file"
        )
    image = None
    if requirements and not environ.get("TFCLUSTER_IMAGE"):
        image = training_project.image_tag(requirements)
    bake = None
    if arguments.bake:
        if arguments.tag is not None:
            base = image or environ.get("TFCLUSTER_IMAGE") or DEFAULT_IMAGE
            training_project.check_tag(arguments.tag, base)
        bake = training_project.bake_context(directory, data)
        # Again, now that it is known which files the image will hold: one the command needs may
        # be left out (by the project's .dockerignore, say), and a worker would not find it.
        mounts = training_project.Mounts(directory, data, baked=bake.files)
        training_project.check_command(command, mounts)
    options = ["--project", shown]
    if arguments.command is not None:
        options += ["--command", arguments.command]
    if arguments.data is not None:
        options += ["--data", arguments.data]
    for text in arguments.env:
        options += ["--env", text]
    for path in arguments.env_file:
        options += ["--env-file", path]
    if arguments.requirements is not None:
        options += ["--requirements", arguments.requirements]
    if arguments.bake:
        options.append("--bake")
    if arguments.tag is not None:
        options += ["--tag", arguments.tag]
    return Project(
        arguments=tuple(options),
        directory=directory,
        command=tuple(command),
        data=data,
        variables=variables,
        requirements=tuple(requirements),
        requirements_file=requirements_file and os.path.realpath(requirements_file),
        image=image,
        bake=bake,
        tag=arguments.tag,
    )


# -- The run ------------------------------------------------------------------------------------


def execute(plan: Plan) -> int:
    environment = {**os.environ, **plan.environment()}
    if not plan.junit:
        return run_cluster(plan, environment)[0]
    # Whatever the end, a CI report must fail whenever the run does: a cancelled CI job's SIGTERM
    # ends the run as Ctrl-C does, and the report is written on the way out.
    previous = signal.signal(signal.SIGTERM, _terminated)
    status, ran = 1, False
    try:
        status, ran = run_cluster(plan, environment)
    except KeyboardInterrupt:
        status = 128 + signal.SIGINT
        raise
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else 1
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        workers = plan.names if ran else []
        junit_report.write(Path(plan.junit), status=status, workers=workers, root=ROOT, environment=environment)
    return status


def _terminated(_signum, _frame) -> NoReturn:
    raise SystemExit(128 + signal.SIGTERM)


def run_cluster(plan: Plan, environment: dict[str, str]) -> tuple[int, bool]:
    """Sets up, brings the cluster up, and waits for its verdict: (the exit status, whether the
    cluster was brought up). `environment` gains the baked image's name, if any."""
    # Before the set-up, as always: a file that cannot be written should cost no set-up. The env
    # file is written even when empty, so that no earlier run's variables are what a worker gets.
    written = {name: text for name, text in plan.written().items() if text is not None}
    for name, text in written.items():
        try:
            (ROOT / name).parent.mkdir(parents=True, exist_ok=True)
            # Readable by the user alone: the env file holds the program's variables, secrets perhaps.
            descriptor = os.open(ROOT / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.write(text)
            os.chmod(ROOT / name, 0o600)  # An older file keeps its mode through O_TRUNC.
        except OSError as error:
            print(f"run: cannot write {name}: {error.strerror}", file=sys.stderr)
            return BAD_ARGUMENTS, False
    setup = subprocess.run([str(ROOT / SETUP), *setup_options(plan)], cwd=ROOT, env=environment)
    if setup.returncode != 0:
        return exit_status(setup.returncode), False
    if plan.bakes:
        baked_image, status = bake(plan.project, environment)
        if baked_image is None:
            return status, False
        environment.update(plan.environment(baked_image))
    sources = plan.bind_sources()
    if sources and hostpaths.in_container(environment):
        # After the set-up: the check runs the trainer image, which is there only now.
        image = environment.get("TFCLUSTER_IMAGE", DEFAULT_IMAGE)
        for what in hostpaths.unseen(sources, image, environment):
            print(f"run: {hostpaths.refusal(what, sources[what])}", file=sys.stderr)
            return BAD_ARGUMENTS, False
    quiet = {"cwd": ROOT, "env": environment, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.run(DOWN, **quiet)
    if plan.bakes:
        # After `down`, so that the last run's containers no longer hold the images.
        remove_superseded(plan.project, baked_image, quiet)
    with interrupts_left_to_compose():
        verdict = subprocess.run(UP, cwd=ROOT, env=environment)
    subprocess.run(STOP, **quiet)
    return exit_status(verdict.returncode), True


def base_image(variables: dict[str, str]) -> str:
    """The image the workers run without --bake, and a baked one is built on: compose.yaml's."""
    return interpolate(first_image((ROOT / BASE_FILE).read_text(encoding="utf-8")), variables)


def bake(project: Project, environment: dict[str, str]) -> tuple[str | None, int]:
    """Builds the baked image: (its name, 0), or (None, the status to exit with) once said why.

    The base image is the one the set-up has just built, so its id is known now, and with it the
    default name. The context is written to `docker build -`'s standard input as it is read.
    """
    base = base_image({**dotenv(ROOT / ".env"), **environment})
    dockerfile = (ROOT / BAKE_DOCKERFILE).read_text(encoding="utf-8")
    tag = project.tag
    if tag is None:
        inspect = ["docker", "image", "inspect", "--format", "{{.Id}}", base]
        inspected = subprocess.run(inspect, cwd=ROOT, env=environment, capture_output=True, text=True)
        if inspected.returncode != 0:
            print(f"run: --bake: no image {base} to build on: {last_line(inspected.stderr)}", file=sys.stderr)
            return None, exit_status(inspected.returncode)
        digest = training_project.context_digest(project.bake, dockerfile, inspected.stdout.strip())
        tag = training_project.baked_tag(digest)
    print(f"run | baking {project.directory} ({project.bake.summary()}) into {tag}, on {base}", file=sys.stderr)
    command = build_command(tag, base, project.directory)
    # The legacy builder's notice that it is deprecated goes to stderr on every build: kept aside,
    # and shown only with the error of a build that failed.
    with tempfile.TemporaryFile() as errors:
        build = subprocess.Popen(
            command, cwd=ROOT, env=environment, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors
        )
        try:
            training_project.write_context(project.bake, dockerfile, build.stdin)
        except BrokenPipeError:
            pass  # Docker stopped reading: its status and message say why.
        except OSError as error:
            # A file of the project that could not be read after all (gone or changed since the check).
            build.kill()
            build.wait()
            print(f"run: --bake: {error.filename or project.directory}: {error.strerror or error}", file=sys.stderr)
            return None, BAD_ARGUMENTS
        finally:
            with contextlib.suppress(BrokenPipeError):
                build.stdin.close()
        status = build.wait()
        if status != 0:
            errors.seek(0)
            sys.stderr.write(errors.read().decode(errors="replace"))
            print(f"run: --bake: docker build of {tag} failed (exit status {status})", file=sys.stderr)
            return None, exit_status(status)
    return tag, 0


def build_command(tag: str, base: str, directory: str) -> list[str]:
    """`docker build`, reading the context (with the Dockerfile in it) from standard input."""
    label = f"{training_project.FOLDER_LABEL}={training_project.folder_label(directory)}"
    return [
        *("docker", "build", "--quiet", "--file", training_project.CONTEXT_DOCKERFILE, "--tag", tag),
        *("--build-arg", f"TFCLUSTER_IMAGE={base}", "--label", label, "-"),
    ]


def remove_superseded(project: Project, current: str, quiet: dict) -> None:
    """Removes the same folder's earlier baked images, by their default names only (never a --tag's),
    and any baked image that a rebuild left without a name.

    Each change to the project names a new image; without this they would pile up. A name is
    removed, not an image, so that one also tagged for a registry stays; one still used by a
    container (another Compose project's, say) stays as well.
    """
    if project.tag is None:
        label = f"label={training_project.FOLDER_LABEL}={training_project.folder_label(project.directory)}"
        listed = subprocess.run(
            ["docker", "image", "ls", "--filter", label, "--format", "{{.Repository}}:{{.Tag}}"],
            cwd=quiet["cwd"],
            env=quiet["env"],
            capture_output=True,
            text=True,
        )
        repository = training_project.BAKED_REPOSITORY + ":"
        superseded = [name for name in listed.stdout.split() if name.startswith(repository) and name != current]
        if listed.returncode == 0 and superseded:
            subprocess.run(["docker", "image", "rm", *superseded], **quiet)
    # A --tag used again leaves its earlier image nameless ("dangling"): only those go.
    subprocess.run(["docker", "image", "prune", "--force", "--filter", f"label={BAKED_TITLE}"], **quiet)


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


@contextlib.contextmanager
def interrupts_left_to_compose():
    """Ctrl-C reaches Compose as well (one process group): it stops the containers and exits, and
    this script then stops what is left and reports the status, as the shell version did."""
    # A handler, not SIG_IGN, which Compose would inherit; a handler is reset in the child by exec.
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def exit_status(returncode: int) -> int:
    # A process ended by a signal is 128 + the signal, as a shell reports it.
    return 128 - returncode if returncode < 0 else returncode


# -- The dry run --------------------------------------------------------------------------------

# A Compose variable: ${NAME}, ${NAME:-default} or ${NAME-default} (the others are shown as
# their value alone), $NAME, or $$ for a dollar sign.
SETTING = re.compile(r"^\s+((?:TF|TRAIN)_[A-Z0-9_]+): (.*)$", re.MULTILINE)


def describe(plan: Plan, environ) -> str:
    """What the run would do, as text; reads the Compose files and .env, and calls nothing."""
    # The baked image's name is shown as a pattern when it is known only after the set-up.
    environment = plan.environment(UNKNOWN_BAKED_TAG if plan.bakes and plan.project.tag is None else None)
    variables = {**dotenv(ROOT / ".env"), **environ, **environment}
    # The files the run would write are not there yet (or are an earlier run's).
    generated = (WORKERS_FILE, slowdown.SLOW_FILE, devmode.DEV_FILE)
    texts = {name: (ROOT / name).read_text(encoding="utf-8") for name in plan.files if name not in generated}
    override = plan.override()
    if override is not None:
        texts[WORKERS_FILE] = override
    project, project_source = project_name(texts, variables)
    image = interpolate(first_image(texts[BASE_FILE]), variables)
    shaper_image = interpolate(first_image((ROOT / NETWORK_FILE).read_text(encoding="utf-8")), variables)
    hosts = ",".join(plan.names)
    waited_for = plan.names + (["the keeper"] if plan.recover else [])
    wheelhouses = "docker/wheels and docker/extra-wheels" if variables.get("EXTRA_REQUIREMENTS") else "docker/wheels"

    lines = [
        f"scripts/run {shlex.join(arguments_of(plan))}: what it would do; nothing is set up, built, written or "
        "started.",
        "",
        f"compose files  {':'.join(plan.files)} (COMPOSE_FILE)",
        f"project        {project} ({project_source})",
        f"set-up         {shlex.join([SETUP, *setup_options(plan)])}: Compose v2 if missing, the base image, "
        f"{wheelhouses}, then",
        f"               a build of {image} (worker-0)"
        + (f" and {shaper_image} (shaper-0)" if plan.profile else "")
        + (", unless current (--dev: its code aside)" if plan.dev else ", unless current"),
    ]
    rendering = shlex.join(["scripts/workers.py", str(plan.worker_count), *plan.workers_options()])
    if plan.renders_workers:
        lines.append(f"rendered       {WORKERS_FILE}, by {rendering}")
    if plan.trainer_script:
        where = WORKERS_FILE if plan.renders_workers else OWN_TRAINER_FILE
        lines.append(f"trainer        {plan.trainer_script}, read-only at /user/train.py on every worker ({where})")
    elif plan.project:
        lines += describe_project(plan, environ, image)
    else:
        lines.append("trainer        the built-in one, python -m trainer.training")
    if plan.dev:
        mounted = ", ".join(devmode.services(plan.names, plan.recover))
        lines.append(f"code           this checkout's trainer/, read-only at {devmode.TARGET} on {mounted} (--dev)")
    if plan.profile:
        shapers = ", ".join(f"shaper-{index}" for index in range(plan.worker_count))
        lines.append(f"network        profile {plan.profile}, applied and measured by {shapers}")
    else:
        lines.append("network        not shaped")
    if plan.recover:
        limit = interpolate(declared(texts[RECOVERY_FILE], "TF_RESTART_LIMIT"), variables)
        lines.append(f"recovery       the keeper restarts the whole cluster after a failure, {limit} times at most")
        lines.append(f"               (TF_RESTART_LIMIT={limit}, compose.recovery.yaml)")
    else:
        lines.append("recovery       none: a failure ends the run")
    lines += describe_slowed(plan, interpolate(declared(texts[BASE_FILE], "cpus"), variables))
    lines.append(f"verdict        the verifier's, once it has heard from {', '.join(waited_for)}")
    if plan.junit:
        lines.append(f"report         the verdict as JUnit XML in {plan.junit}, whatever the run's end (--junit)")

    width = max(len(name) for name in plan.names) + 2
    lines += ["", f"{'workers':<{width + 2}}TF_TASK_INDEX  TF_WORKER_HOSTS"]
    lines += [f"  {name:<{width}}{index:<15}{hosts}" for index, name in enumerate(plan.names)]
    lines.append("settings of every worker (compose.yaml's defaults, unless your environment or .env sets them):")
    lines += [f"  {key}={shlex.quote(value)}" for key, value in worker_settings(plan, texts, variables).items()]

    lines += ["", "commands, from the project's root, with the COMPOSE_FILE above:"]
    lines += [f"  write {name}" for name, text in plan.written().items() if text is not None]
    lines.append(f"  {shlex.join([SETUP, *setup_options(plan)])}")
    if plan.bakes:
        build = build_command(plan.project.tag or UNKNOWN_BAKED_TAG, image, plan.project.directory)
        lines.append(f"  {shlex.join(build)} < (the context above, as a tar)")
    lines.append(f"  {shlex.join(DOWN)}")
    if plan.bakes and plan.project.tag is None:
        lines.append(f"  docker image rm (this folder's earlier {training_project.BAKED_REPOSITORY} images, if any)")
    if plan.bakes:
        lines.append(f"  docker image prune --force --filter label={BAKED_TITLE}")
    lines += [f"  {shlex.join(command)}" for command in (UP, STOP)]
    lines.append("exit status: the verifier's (scripts/run --help)")

    lines += ["", "The whole model Compose would run (this calls Docker, but builds and starts nothing):"]
    if override is not None:
        lines.append(f"  python3 {rendering} --output {WORKERS_FILE}")
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in environment.items())
    lines.append(f"  {assignments} docker compose config")
    if plan.project:
        lines.append(f"  (which reads {ENV_FILE} as the last run wrote it, if any)")
    if plan.slowed:
        lines.append(f"  (once a run has written {slowdown.SLOW_FILE})")
    return "\n".join(lines) + "\n"


def describe_slowed(plan: Plan, cpus: str) -> list[str]:
    """The dry run's line on the workers' CPU limits: compose.yaml's, and --slow's."""
    if not plan.slowed:
        return [f"cpus           every worker: {cpus} (TF_WORKER_CPUS); --slow NAME=CPUS limits one"]
    limits = ", ".join(f"{name}: {slowdown.cpus_text(limit)}" for name, limit in plan.slowed.items())
    return [f"cpus           {limits} (--slow, {slowdown.SLOW_FILE}); every other worker: {cpus} (TF_WORKER_CPUS)"]


def describe_project(plan: Plan, environ, base: str) -> list[str]:
    """The dry run's lines on your project: command, folders, variables, requirements and images."""
    project = plan.project
    where = WORKERS_FILE if plan.renders_workers else BAKED_FILE if plan.bakes else PROJECT_FILE
    mounts = WORKERS_FILE if plan.renders_workers else DATA_FILE
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
            f"               through {ENV_FILE} (env_file), with "
            f"{training_project.USER_ENVIRONMENT_LIST}={','.join(sorted(project.variables))}"
        )
    else:
        lines.append(f"your variables none (--env, --env-file); {ENV_FILE} is written with none")
    if project.requirements:
        image = project.image or environ.get("TFCLUSTER_IMAGE")
        source = "its name, from requirements" if project.image else "yours"
        lines += [
            f"requirements   {' '.join(project.requirements)} (EXTRA_REQUIREMENTS)",
            f"               from {project.requirements_file}, held to docker/requirements.txt's pins,",
            f"               in the image {image} (TFCLUSTER_IMAGE: {source})",
        ]
    else:
        lines.append(f"requirements   none (no {training_project.REQUIREMENTS_FILE} in the project, no --requirements)")
    return lines


def describe_bake(project: Project, base: str) -> list[str]:
    """The dry run's lines on the baked image: its name, what it is built on, what goes into it."""
    if project.tag is not None:
        lines = [f"baked image    {project.tag} (--tag), {BAKE_DOCKERFILE} on {base}"]
    else:
        lines = [
            f"baked image    {UNKNOWN_BAKED_TAG}, HASH after what is sent and the id of {base}",
            f"               ({BAKE_DOCKERFILE} on it), known once the set-up has built that",
        ]
    left_out = ["__pycache__", ".git", "virtual environments"]
    if project.bake.dockerignore:
        left_out.insert(0, f"what {training_project.DOCKERIGNORE} names")
    if project.data and project.data.startswith(project.directory + os.sep):
        left_out.append(f"{os.path.relpath(project.data, project.directory)}/ (--data: mounted instead)")
    lines.append(f"               sent: {project.bake.summary()}")
    lines.append(f"               left out: {', '.join(left_out)}")
    return lines


def setup_options(plan: Plan) -> list[str]:
    """scripts/setup builds the network shaper's image only for a run with a network profile, and
    in development mode does not rebuild the trainer image for its code alone."""
    return [*(["--shaper"] if plan.profile else []), *(["--dev"] if plan.dev else [])]


def arguments_of(plan: Plan) -> list[str]:
    """The options that ask for this plan, in the order of --help."""
    arguments = []
    if plan.renders_workers:
        arguments += ["--workers", str(plan.worker_count)]
    if plan.recover:
        arguments.append("--recover")
    if plan.profile:
        arguments += ["--network", plan.profile]
    arguments += slowdown.arguments(plan.slowed)
    if plan.dev:
        arguments.append("--dev")
    if plan.junit:
        arguments += ["--junit", plan.junit]
    if plan.project:
        arguments += plan.project.arguments
    return [*arguments, "--dry-run"]


def worker_settings(plan: Plan, texts: dict[str, str], variables: dict[str, str]) -> dict[str, str]:
    """The TF_* and TRAIN_* settings every worker gets, but its index and host list (shown apart).

    From compose.yaml's two blocks that every worker merges (`&cluster`, `&worker-environment`),
    then what compose.workers.yaml adds for all; interpolated as Compose would.
    """
    declarations = anchored_block(texts[BASE_FILE], "cluster") + anchored_block(texts[BASE_FILE], "worker-environment")
    declarations += texts.get(WORKERS_FILE, "")
    shown_apart = {"TF_TASK_INDEX", "TF_WORKER_HOSTS"}
    settings = {
        key: interpolate(unquote(value), variables)
        for key, value in SETTING.findall(declarations)
        if key not in shown_apart
    }
    if plan.profile:
        settings["TF_NETWORK_PROFILE"] = plan.profile
    return settings


def anchored_block(text: str, anchor: str) -> str:
    """The lines under the YAML key that defines `&anchor` (those indented deeper than it)."""
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if re.search(rf"&{re.escape(anchor)}\s*$", line):
            indent = len(line) - len(line.lstrip())
            block = []
            for inner in lines[number + 1 :]:
                if inner.strip() and len(inner) - len(inner.lstrip()) <= indent:
                    break
                block.append(inner)
            return "\n".join(block) + "\n"
    raise LookupError(f"{BASE_FILE} has no block anchored &{anchor}; scripts/run.py's dry run reads it")


def declared(text: str, name: str) -> str:
    """The value a Compose file gives the setting `name` (its first declaration)."""
    match = re.search(rf"^\s+{re.escape(name)}: (.*)$", text, re.MULTILINE)
    if not match:
        raise LookupError(f"no {name} in the Compose file; scripts/run.py's dry run reads it")
    return unquote(match.group(1))


def first_image(text: str) -> str:
    match = re.search(r"^\s+image: (\S+)\s*$", text, re.MULTILINE)
    if not match:
        raise LookupError("no image: in the Compose file; scripts/run.py's dry run reads it")
    return match.group(1)


def project_name(texts: dict[str, str], variables: dict[str, str]) -> tuple[str, str]:
    """Compose's project name and where it comes from, by Compose's own precedence."""
    if variables.get("COMPOSE_PROJECT_NAME"):
        return variables["COMPOSE_PROJECT_NAME"], "COMPOSE_PROJECT_NAME"
    for name, text in reversed(texts.items()):
        match = re.search(r"^name: (\S+)\s*$", text, re.MULTILINE)
        if match:
            return interpolate(unquote(match.group(1)), variables), f"{name}'s name"
    return ROOT.name, "the project's folder"


def interpolate(text: str, variables: dict[str, str]) -> str:
    """Compose's interpolation, as the env files' (scripts/training_project.py) does it."""
    return training_project.interpolate(text, variables.get)


def unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return re.sub(r"\s+#.*$", "", value)


def dotenv(path: Path) -> dict[str, str]:
    """The variables of Compose's .env file, which it reads for interpolation (the environment wins)."""
    if not path.is_file():
        return {}
    variables = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, equals, value = line.strip().partition("=")
        if equals and key and not key.startswith("#"):
            variables[key.strip()] = unquote(value)
    return variables


def main(argv: list[str]) -> int:
    command_line = parser()
    arguments = command_line.parse_args(argv)
    plan = make_plan(arguments, os.environ, command_line.fail)
    if arguments.dry_run:
        try:
            sys.stdout.write(describe(plan, os.environ))
        except LookupError as error:
            # compose.yaml no longer laid out as the dry run reads it: a bug of this script's.
            print(f"run: --dry-run: {error}", file=sys.stderr)
            return 1
        return 0
    return execute(plan)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        # Ctrl-C outside the run itself (in the set-up, say): its output has said enough.
        sys.exit(128 + signal.SIGINT)

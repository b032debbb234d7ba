"""The Python API: a `Cluster` that plans, runs and tears down, and the `Run` it returns.

  from tfcluster import Cluster

  run = Cluster(workers=3, project="examples/keras-fit", env={"TF_USE_LEGACY_KERAS": "1"}).run()
  assert run.passed, run.problems
  print(run.workers["worker-0"].metrics)

`scripts/run` is this API behind a command line (tfcluster/commands/run.py): the same checks, the
same plan, the same steps. Every bad value is a `Refusal` (tfcluster/errors.py), raised by
`plan()` before anything is done. Paths are taken from where you are, as on the command line.
"""

import os
import re
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tfcluster import paths
from tfcluster.ci import junit
from tfcluster.cluster import cancel, composefiles, dryrun, runs, scaling, slowdown
from tfcluster.cluster.compose import ComposeProject
from tfcluster.cluster.plan import (
    BASE_FILE,
    Plan,
    check_network,
    check_tag,
    check_warm,
    output_path,
    trainer_script_of,
)
from tfcluster.cluster.result import Run
from tfcluster.cluster.steps import CANCEL_STOP, CANCEL_WAIT, DOWN, Execution
from tfcluster.cluster.warm import WarmCluster
from tfcluster.errors import Refusal
from tfcluster.project import options
from trainer.contract.exitcodes import ExitCode

# Compose's rule for a project name (`docker compose -p`).
PROJECT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
# The name a baked run's Compose file is given when only its containers matter (tearing down).
TEARDOWN_IMAGE = "tfcluster-baked:teardown"


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Cluster:
    """A cluster to train: compose.yaml's workers, with what you ask for on top (scripts/run --help
    says what each option does; the fields have its options' names)."""

    workers: int = scaling.DEFAULT_WORKERS
    recover: bool = False
    network: str | None = None
    # Worker name -> CPUs (scripts/run --slow worker-1=0.25).
    slow: Mapping[str, float] = field(default_factory=dict)
    dev: bool = False
    project: str | None = None
    command: str | None = None
    data: str | None = None
    # NAME -> VALUE, or NAME=VALUE texts; they win over env_files.
    env: Mapping[str, str] | Sequence[str] = ()
    env_files: Sequence[str] = ()
    requirements: str | None = None
    bake: bool = False
    tag: str | None = None
    junit: str | None = None
    # Where the run's report.html goes (default: beside `junit`, as FILE.html; else in the run's folder).
    report: str | None = None
    # The Compose project to run as, taken or refused (default: COMPOSE_PROJECT_NAME, else
    # compose.yaml's, tfcluster; NAME-2, NAME-3... while another run holds it).
    name: str | None = None
    warm: bool = False  # On the warm cluster (scripts/run --warm): its workers stay up, and every run is forked.
    chief: bool = False  # worker-0 as TF_CONFIG's `chief`, the others as the `worker` job (scripts/run --chief).
    faults: Sequence[str] = ()  # With `network`, scripts/run --fault's clauses: "cut worker-1 at step 8 for 5s".
    links: Sequence[str] = ()  # With `network`, scripts/run --link's: "worker-0,worker-1 <-> worker-2,worker-3: wan".
    # Where TRAINER_SCRIPT, EXTRA_REQUIREMENTS, TFCLUSTER_IMAGE and the settings are read from.
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def plan(self, *, collects: bool = True) -> Plan:
        """The run this asks for, checked; raises Refusal, before anything is done."""
        _check_types(self)
        faults, links = check_network(self.workers, self.network, self.faults, self.links)
        check_warm(self.warm, self.recover)
        trainer_script = trainer_script_of(self.environ, self.project is not None)
        check_tag(self.tag, self.bake)
        try:
            slowed = slowdown.check(slowdown.given(self.slow), scaling.worker_names(self.workers))
        except ValueError as error:
            raise Refusal(str(error)) from None
        project = self._project()
        junit = output_path(self.junit)
        page = output_path(self.report, option="--report", example="report.html")
        name, name_given = self._project_name()
        return Plan(
            self.workers,
            self.recover,
            self.network,
            trainer_script,
            project,
            slowed,
            self.dev,
            junit,
            collects=collects,
            name=name,
            name_given=name_given,
            warm=self.warm,
            socket_gid=_socket_gid(self.environ) if self.recover else None,
            chief=self.chief,
            faults=faults,
            links=links,
            report=page,
        )

    def _project_name(self) -> tuple[str, bool]:
        """The Compose project's name, and whether it was asked for (`name`, --name) rather than
        the default: COMPOSE_PROJECT_NAME (the environment's, else .env's), else compose.yaml's,
        as Compose itself chooses, which a run passes over while another run holds it."""
        if self.name is not None:
            return self.name, True
        variables = {**composefiles.dotenv(paths.ROOT / ".env"), **self.environ}
        texts = {BASE_FILE: (paths.ROOT / BASE_FILE).read_text(encoding="utf-8")}
        name, source = composefiles.project_name(texts, variables)
        if source == "COMPOSE_PROJECT_NAME" and not PROJECT_NAME.fullmatch(name):
            raise Refusal(
                f"COMPOSE_PROJECT_NAME={name!r}: a Compose project name is lower-case letters, digits, - and _"
            )
        return name, False

    def _project(self) -> options.Project | None:
        if self.project is None:
            given = {"command": self.command, "data": self.data, "env": self.env, "env_file": self.env_files}
            given |= {"requirements": self.requirements, "bake": self.bake}
            for option, value in given.items():
                if value:
                    raise Refusal(f"--{option.replace('_', '-')} goes with --project DIR (your training project)")
            return None
        chosen = options.ProjectOptions(
            self.project,
            self.command,
            self.data,
            options.assignments(self.env),
            tuple(self.env_files),
            self.requirements,
            self.bake,
            self.tag,
        )
        return options.check(chosen, self.environ)

    def describe(self) -> str:
        """The dry run: what `run()` would do, as text; nothing is set up, built, written or started."""
        return dryrun.describe(self.plan(), self.environ)

    def run(self) -> Run:
        """Sets up what is missing, trains the cluster and reads its verdict back."""
        return execute(self.plan(), self.environ)

    def warm_down(self) -> int:
        """Takes this cluster's warm cluster down (scripts/run --warm-down); returns Compose's exit status."""
        environment = {"COMPOSE_FILE": BASE_FILE, **({"COMPOSE_PROJECT_NAME": self.name} if self.name else {})}
        return WarmCluster({**self.environ, **environment}, scaling.worker_names(self.workers)).down()

    def down(self) -> int:
        """Removes the cluster's containers, networks and volumes (a run leaves its stopped
        containers, whose logs are the verdict's evidence, until the next run or this); returns
        Compose's exit status. It needs no valid plan: a project folder gone since is no reason to
        leave the containers behind."""
        try:
            environment = self.plan(collects=False).environment(baked_image=TEARDOWN_IMAGE)
        except Refusal:
            # compose.yaml alone names every service a run has; --remove-orphans takes the rest.
            environment = {"COMPOSE_FILE": BASE_FILE, **({"COMPOSE_PROJECT_NAME": self.name} if self.name else {})}
        # A baked run's file requires its image's name, which tearing down needs no image of.
        environment.setdefault("TFCLUSTER_BAKED_IMAGE", TEARDOWN_IMAGE)
        name = environment.get("COMPOSE_PROJECT_NAME")
        if name and runs.held(paths.ROOT, name):
            # A live run's (the one a run of this cluster fell back from, say): not this call's to end.
            say(f"the Compose project {name} belongs to a run still going: not taken down (Run.name is yours)")
            return 1
        status = ComposeProject.from_environment({**self.environ, **environment}).quietly(*DOWN).returncode
        if status == 0 and "COMPOSE_PROJECT_NAME" in environment:
            runs.remove_folder(paths.ROOT, environment["COMPOSE_PROJECT_NAME"])  # Its generated files too.
        return status


def _check_types(cluster: "Cluster") -> None:
    """What argparse checks on the command line, for values given in Python; raises Refusal."""
    if type(cluster.workers) is not int or not 1 <= cluster.workers <= scaling.MAX_WORKERS:
        raise Refusal(
            f"workers={cluster.workers!r}: the number of workers must be a whole number, 1 to {scaling.MAX_WORKERS}"
        )
    if cluster.name is not None and not (isinstance(cluster.name, str) and PROJECT_NAME.fullmatch(cluster.name)):
        raise Refusal(f"name={cluster.name!r}: a Compose project name is lower-case letters, digits, - and _")
    for field_name in ("env", "env_files"):
        if isinstance(getattr(cluster, field_name), str):
            raise Refusal(
                f"{field_name}={getattr(cluster, field_name)!r}: give a list (or, for env, a mapping), not a string"
            )
    if isinstance(cluster.slow, str) or (
        isinstance(cluster.slow, Mapping) and not all(_is_number(cpus) for cpus in cluster.slow.values())
    ):
        raise Refusal(f"slow={cluster.slow!r}: give a mapping of worker to CPUs, such as {{'worker-1': 0.25}}")


def _socket_gid(environ: Mapping[str, str]) -> int | None:
    """The group of the Docker socket compose.recovery.yaml mounts (DOCKER_SOCKET), if it is here."""
    try:
        return os.stat(environ.get("DOCKER_SOCKET") or "/var/run/docker.sock").st_gid
    except OSError:
        return None


def execute(plan: Plan, environ: Mapping[str, str], *, first: Callable[[], None] | None = None) -> Run:
    """Claims the run's own Compose project and folder (tfcluster/cluster/runs.py), then runs the
    plan's steps in order, until one ends the run; the verdict is read back whatever the end (a
    step marked `always`). `first`, if given, is done before the claim, with the report already
    failing (scripts/ci-run's removal of what killed jobs left)."""
    if plan.junit:  # Failing until the run has ended: a run killed outright leaves it so.
        junit.write_unfinished(Path(plan.junit))
    if first is not None:
        first()
    try:
        claimed = runs.claim(paths.ROOT, plan.name, given=plan.name_given)
    except Refusal as refusal:
        say(str(refusal))
        if plan.junit:
            junit.write_failure(Path(plan.junit), ExitCode.CONFIG_ERROR, str(refusal))
        return Run(ExitCode.CONFIG_ERROR, False, None)
    try:
        if claimed.slot != plan.name and not plan.warm:
            say(
                f"another run is using the Compose project {plan.name}: this one is {claimed.slot} "
                f"(docker compose -p {claimed.slot} ...)"
            )
        # A warm run's containers are the warm cluster's, whatever its files' folder.
        plan = replace(plan, slot=claimed.slot, **({} if plan.warm else {"name": claimed.slot}))
        return _execute(plan, environ)
    finally:
        claimed.release()


def _execute(plan: Plan, environ: Mapping[str, str]) -> Run:
    execution = Execution(plan, {**environ, **plan.environment()})
    steps = plan.steps
    # Whatever the end, a CI report must fail whenever the run does, and a signal (Ctrl-C, a
    # cancelled CI job's SIGTERM, a SIGHUP) stops the cluster: tfcluster/cluster/cancel.py. One
    # watch from the first step to the last clean-up, so that no signal falls between the two.
    cancelled = None
    with cancel.Watch() as signals:
        try:
            for step in (step for step in steps if not getattr(step, "always", False)):
                status = step.run(execution)
                if status is not None:
                    execution.status = status
                    break
        except cancel.Cancelled as signalled:
            cancelled = signalled
            execution.status = signalled.status
        except KeyboardInterrupt:  # SIGINT where no handler of the run's was set (another thread's, say).
            cancelled = cancel.Cancelled(signal.SIGINT)
            execution.status = cancelled.status
        except SystemExit as exit:
            execution.status = exit.code if isinstance(exit.code, int) else 1
            raise
        finally:
            signals.shield()
            _clean_up(execution, cancelled)
        if cancelled is None and signals.late is not None:
            cancelled = _cancelled_late(execution, signals.late)
    if cancelled is not None:
        # As the signal itself would have ended the process: Python's own 130 for Ctrl-C.
        if cancelled.signal_number == signal.SIGINT:
            raise KeyboardInterrupt
        raise cancelled
    return Run(execution.exit_status, execution.ran, execution.verdict, execution.logs, plan.name, execution.report)


def _clean_up(execution: Execution, cancelled: cancel.Cancelled | None) -> None:
    """After the steps, however they ended: a cancelled run's cluster stopped, the steps marked
    `always` (the verdict read back, the report), then its cluster taken down."""
    plan = execution.plan
    # A `down` begun in the background is done before anything else is; a cancelled run gives it
    # CANCEL_WAIT (it takes 0.4 s), for a CI runner's cancel allows only seconds in all.
    execution.finish_all(None if cancelled is None else CANCEL_WAIT)
    if cancelled is not None:
        say(f"received {cancelled.name}: stopping the cluster")
        if execution.ran and not plan.warm:
            execution.quiet(*CANCEL_STOP)
    try:
        for step in (step for step in plan.steps if getattr(step, "always", False)):
            step.run(execution)
    finally:  # Taken down even if reading its verdict failed.
        if cancelled is not None and execution.ran and not plan.warm:
            execution.quiet(*DOWN)


def _cancelled_late(execution: Execution, signal_number: int) -> cancel.Cancelled:
    """A signal while a finished run's verdict was read back: the run ends as cancelled all the
    same (a cancelled CI job's step must not pass), its cluster taken down, its report failing."""
    cancelled = cancel.Cancelled(signal_number)
    plan = execution.plan
    say(f"received {cancelled.name} as the run ended: its verdict stands in the report, the run fails")
    execution.status = cancelled.status
    with cancel.shielded():
        if execution.ran and not plan.warm:
            execution.quiet(*DOWN)
        if plan.junit:
            junit.write(Path(plan.junit), status=cancelled.status, record=execution.verdict, ran=execution.ran)
    return cancelled


def say(line: str) -> None:
    print(f"run: {line}", file=sys.stderr, flush=True)

"""The steps of a run, each both done and described: `execute` runs them, the dry run prints them.

A step is a command line (or a few) that it shows (`lines(plan, environ)`, environ being the
run's environment), and what it does (`run(execution)`). `of(plan)` is the one list of
a plan's steps, in order; nothing else decides what a run does, so the dry run cannot leave out
what the run does (the bind-mount check, for one). A step that ends the run returns its exit
status; one that goes on returns None.
"""

import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tfcluster import paths, report
from tfcluster.ci import hostpaths
from tfcluster.cluster import build, cancel, composefiles, runs, verdict, warm
from tfcluster.cluster.compose import VERDICT_SERVICE, ComposeProject, exit_status
from tfcluster.project.layout import DEFAULT_IMAGE
from tfcluster.report import engine
from trainer.contract.exitcodes import ExitCode

SETUP = "scripts/setup"
# scripts/setup --image-id-file's, in the run's folder (tfcluster/cluster/runs.py).
IMAGE_ID_FILE = "image"
# The Compose commands of a run, in order. `down` first: an earlier run's containers (their logs)
# and volumes would otherwise be reused, volumes with the options they were created with.
DOWN = ("down", "--volumes", "--remove-orphans", "--timeout", "1")
# Workers' logs and the verdict together; only the verifier's exit ends the run (a plain
# `--exit-code-from` without the service name would stop every worker when the first one exits).
UP = ("up", "--remove-orphans", "--attach-dependencies", "--exit-code-from", VERDICT_SERVICE, VERDICT_SERVICE)
# A worker can outlive the verdict (for example one still waiting for a peer that failed).
STOP = ("stop", "--timeout", "5")
# A cancelled run's: the containers Compose did not stop (it was not running, or was killed), with
# the workers' own stop_grace_period, before `down` (tfcluster/cluster/cancel.py).
CANCEL_STOP = ("stop",)
# How long a cancelled run waits for what it began in the background (tfcluster/cluster/api.py).
CANCEL_WAIT = 2.0


@dataclass
class Execution:
    """One run as it goes: its plan, the environment every command gets, and what it has found."""

    plan: object
    environment: dict[str, str]
    baked_image: str | None = None
    # The trainer image's id, as the set-up found it current: what Compose is given to run; and its name.
    image_id: str | None = None
    image_name: str | None = None
    # Whether the cluster was brought up (its workers' logs are this run's, not an earlier one's).
    ran: bool = False
    status: int | None = None
    # The verdict as data, and the workers' logs, once read back (tfcluster/cluster/verdict.py).
    verdict: dict | None = None
    logs: dict[str, str] = field(default_factory=dict)
    # Whether the verdict and the logs were taken as the run went (a warm run's).
    collected: bool = False
    # A warm run's output as it came, each line after the host's time (its containers outlive it).
    timed_logs: dict[str, str] = field(default_factory=dict)
    report: str | None = None  # The report's path, once written.
    # The steps begun in the background (Begin), each with its thread and what it returned or raised.
    begun: dict = field(default_factory=dict)

    def finish(self, step) -> int | None:
        """Waits for `step`, begun in the background; what it returned (it raises what it raised)."""
        thread, outcome = self.begun.pop(step, (None, {}))
        if thread is not None:
            thread.join()
        if "raised" in outcome:
            raise outcome["raised"]
        return outcome.get("returned")

    def finish_all(self, bound: float | None = None) -> None:
        """Waits for every step still in the background, however the run ends; up to `bound`
        seconds in all, if given (a cancelled run's: its `down` goes on alone, as a command)."""
        deadline = None if bound is None else time.monotonic() + bound
        for thread, _outcome in list(self.begun.values()):
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    @property
    def root(self):
        return paths.ROOT

    @property
    def exit_status(self) -> int:
        """How the run ended: its status, or 1 if it ended without one (an error on the way)."""
        return self.status if self.status is not None else 1

    def compose(self) -> ComposeProject:
        """The Compose driver for this run: its files and project name from the environment."""
        return ComposeProject.from_environment(self.environment, cwd=self.root)

    def quiet(self, *arguments: str) -> subprocess.CompletedProcess:
        return self.compose().quietly(*arguments)

    def pin_image(self) -> None:
        """The trainer image by its id: another checkout's build of the same name after the set-up
        is not what runs."""
        if self.image_id:
            if self.image_name is None:  # Pinned again after the bake: the name is the first one's.
                self.image_name = self.environment.get("TFCLUSTER_IMAGE", DEFAULT_IMAGE)
            self.environment["TFCLUSTER_IMAGE"] = self.image_id

    def by_name(self) -> dict[str, str]:
        """The environment with the trainer image by its name: a Dockerfile's FROM needs one, where
        BuildKit takes no image id."""
        return {**self.environment, **({"TFCLUSTER_IMAGE": self.image_name} if self.image_name else {})}


def say(line: str) -> None:
    print(f"run: {line}", file=sys.stderr)


@dataclass(frozen=True)
class WriteFiles:
    """The files the run makes (overrides, your env file), before the set-up: a file that cannot be
    written should cost no set-up. The env file is written even when empty, so that no earlier
    run's variables are what a worker gets."""

    files: dict[str, str]

    def lines(self, _plan, _environ) -> list[str]:
        return [f"write {name}" for name in self.files]

    def run(self, execution: Execution) -> int | None:
        for name, text in self.files.items():
            path = execution.root / name
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                # Readable by the user alone: the env file holds the program's variables, secrets perhaps.
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                    file.write(text)
                os.chmod(path, 0o600)  # An older file keeps its mode through O_TRUNC.
            except OSError as error:
                say(f"cannot write {name}: {error.strerror}")
                return ExitCode.CONFIG_ERROR
        return None


@dataclass(frozen=True)
class SetUp:
    """scripts/setup: Compose v2, base images, wheelhouse, images; quick when nothing is missing."""

    options: tuple[str, ...]

    def lines(self, _plan, _environ) -> list[str]:
        return [shlex.join([SETUP, *self.options])]

    def run(self, execution: Execution) -> int | None:
        command = [str(execution.root / SETUP), *self.options]
        recorded = execution.root / execution.plan.generated(IMAGE_ID_FILE)
        recorded.unlink(missing_ok=True)  # An earlier run's id is not this one's.
        setup = cancel.run(command, cwd=execution.root, env=execution.environment)
        if setup.returncode != 0:
            return exit_status(setup.returncode)
        execution.image_id = recorded.read_text(encoding="utf-8").strip() if recorded.is_file() else None
        execution.pin_image()
        return None


@dataclass(frozen=True)
class Bake:
    """docker build of docker/Dockerfile.project: your project in an image of its own (--bake)."""

    def lines(self, plan, environ) -> list[str]:
        image = composefiles.base_image(dry_variables(plan, environ))
        command = build.build_command(plan.project.tag or build.UNKNOWN_TAG, image, plan.project.directory)
        return [f"{shlex.join(command)} < (the context above, as a tar)"]

    def run(self, execution: Execution) -> int | None:
        project = execution.plan.project
        baked_image, status = build.bake(project, execution.by_name(), execution.root)
        if baked_image is None:
            return status
        execution.baked_image = baked_image
        execution.environment.update(execution.plan.environment(baked_image))
        execution.pin_image()
        return None


@dataclass(frozen=True)
class CheckMounts:
    """In a container that drives the host's engine, that the engine sees each bind mount's source
    as it is here (tfcluster/ci/hostpaths.py). After the set-up: the check runs the trainer image."""

    sources: dict[str, str]

    def lines(self, _plan, _environ) -> list[str]:
        shown = ", ".join(f"{what} {source}" for what, source in self.sources.items())
        return [f"docker run --rm ... test -e (only in a container: that the engine sees {shown})"]

    def run(self, execution: Execution) -> int | None:
        if not hostpaths.in_container(execution.environment):
            return None
        image = execution.environment.get("TFCLUSTER_IMAGE", DEFAULT_IMAGE)
        for what in hostpaths.unseen(self.sources, image, execution.environment):
            say(hostpaths.refusal(what, self.sources[what]))
            return ExitCode.CONFIG_ERROR
        return None


@dataclass(frozen=True)
class CheckName:
    """That no other checkout's containers have taken the run's Compose project name since the run
    claimed it (tfcluster/cluster/runs.py): again just before `up`, after a set-up that may have
    taken minutes (`up` would mix the two clusters; the `down` begun with the set-up, just after
    the claim, found none of theirs), and once the cluster has stopped, for the whole run (a
    verdict over two clusters' containers proves nothing)."""

    after: bool = False

    def lines(self, plan, _environ) -> list[str]:
        when = "after the run" if self.after else "again"
        return [f"docker ps --all --filter label=com.docker.compose.project={plan.name} (no other checkout's, {when})"]

    def run(self, execution: Execution) -> int | None:
        name = execution.plan.name
        others = runs.foreign_checkouts(name, execution.root)
        if not others:
            return None
        if self.after:
            say(
                f"the Compose project {name!r} had containers of another checkout ({others[0]}) while this run "
                "trained: its verdict may be of both clusters, so the run fails; give each its own name (--name)"
            )
            execution.status = ExitCode.CONFIG_ERROR
        else:
            say(
                f"the Compose project {name!r} has had containers of another checkout ({others[0]}) since this "
                "run claimed it: this run stops here and leaves them; give it another name (--name)"
            )
        return ExitCode.CONFIG_ERROR


@dataclass(frozen=True)
class Compose:
    """One Compose command, its output left aside: `down` so that the run starts clean, `stop` for a
    worker that outlives the verdict. Each only where the engine has something for it (`unless`):
    asking takes 0.01 s a kind, Compose 0.1 to 0.3 s to find it has nothing to do, in every run
    (a run under a new name has nothing to take down; one whose workers all ended, nothing to stop)."""

    arguments: tuple[str, ...]
    unless: str | None = None  # "nothing left" or "nothing running", of the run's project (below).
    # Seconds to let running containers end on their own first (`stop`'s, ENDING below).
    ending: float = 0.0

    def lines(self, _plan, _environ) -> list[str]:
        command = shlex.join(ComposeProject.from_environment({}).command(*self.arguments))
        ended = f", or all end within {self.ending:g} s" if self.ending else ""
        return [f"{command} (unless {self.unless}{ended})" if self.unless else command]

    def run(self, execution: Execution) -> int | None:
        if self.unless and not any(of_project(kind, execution.plan.name) for kind in ASKED[self.unless]):
            return None
        if self.ending and ended_within(execution.plan.name, self.ending):
            return None
        execution.quiet(*self.arguments)
        return None


@dataclass(frozen=True)
class Begin:
    """A step begun in the background, waited for by Finish(step) further on: `down` of the last
    run's containers (0.3 to 0.4 s here) while the set-up checks the images (0.3 s). The step gets
    the run as it is when begun (the set-up's image pinned later is not `down`'s business)."""

    step: object

    def lines(self, plan, environ) -> list[str]:
        return [f"{line}, in the background" for line in self.step.lines(plan, environ)]

    def run(self, execution: Execution) -> int | None:
        snapshot = replace(execution, environment=dict(execution.environment), begun={})
        outcome: dict = {}

        def work() -> None:
            try:
                outcome["returned"] = self.step.run(snapshot)
            except BaseException as error:  # noqa: BLE001 - raised again where it is waited for.
                outcome["raised"] = error

        thread = threading.Thread(target=work, name=f"begun {type(self.step).__name__}", daemon=True)
        execution.begun[self.step] = (thread, outcome)
        thread.start()
        return None


@dataclass(frozen=True)
class Finish:
    """Waits for the step begun in the background (Begin); its status, if it ended the run."""

    step: object

    def lines(self, plan, environ) -> list[str]:
        return [f"wait for: {line}" for line in self.step.lines(plan, environ)]

    def run(self, execution: Execution) -> int | None:
        return execution.finish(self.step)


NOTHING_LEFT = "nothing left"  # No container, network or volume of the project: `down` has nothing to do.
NOTHING_RUNNING = "nothing running"  # Every container of the project has stopped: so has `stop`.
# What the engine is asked of the project, kind by kind, for each (report.engine.LISTINGS).
ASKED = {NOTHING_LEFT: ("container", "network", "volume"), NOTHING_RUNNING: ("running",)}


# The verifier judges a worker by the result its launcher wrote as it ended, so a worker's container
# is nearly always still ending when the verdict comes (0.05 to 0.2 s later, here): waiting for
# that end is cheaper than `docker compose stop`, 0.3 s of nearly every run before. A worker that
# outlives the verdict on purpose (one still waiting for a failed peer) is stopped after this.
ENDING = 1.0


def ended_within(name: str, seconds: float) -> bool:
    """Whether every running container of the Compose project `name` ended within `seconds` (`docker
    wait`); False if the engine cannot say, so that `stop` runs as it would have."""
    running = engine.listed("running", name)
    if not running:
        return running is not None
    try:
        waited = subprocess.run(["docker", "wait", *running], capture_output=True, timeout=seconds)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return waited.returncode == 0


def of_project(kind: str, name: str) -> bool:
    """Whether the engine has a thing of `kind` of the Compose project `name`; if it cannot say, it
    may have (the Compose command then runs as always)."""
    ids = engine.listed(kind, name)
    return ids is None or bool(ids)


@dataclass(frozen=True)
class RemoveSuperseded:
    """The same folder's earlier baked images, after `down` (whose containers held them)."""

    def lines(self, plan, _environ) -> list[str]:
        lines = []
        if plan.project.tag is None:
            lines.append(f"docker image rm (this folder's earlier {build.REPOSITORY} images, if any)")
        return [*lines, f"docker image prune --force --filter label={build.BAKED_TITLE}"]

    def run(self, execution: Execution) -> int | None:
        build.remove_superseded(execution.plan.project, execution.baked_image, execution.environment, execution.root)
        return None


@dataclass(frozen=True)
class Up:
    """docker compose up: the workers' logs and the verdict, whose exit status is the run's."""

    def lines(self, _plan, _environ) -> list[str]:
        return [shlex.join(ComposeProject.from_environment({}).command(*UP))]

    def run(self, execution: Execution) -> int | None:
        execution.ran = True
        verdict = execution.compose().attached(*UP)
        execution.status = exit_status(verdict.returncode)
        return None


@dataclass(frozen=True)
class WarmRun:
    """--warm: the run's `docker exec`s on the warm cluster, brought up first if it is not current."""

    def lines(self, plan, _environ) -> list[str]:
        name = warm.project_name({"COMPOSE_PROJECT_NAME": plan.name} if plan.name else {})
        return [
            f"docker compose config --format json (the run's services), then, unless {name} is up and current: "
            f"write {warm.WARM_FILE.format(name=name)}; docker compose -p {name} up --detach --remove-orphans "
            "--force-recreate",
            f"docker exec {name}-SERVICE-1 (each of {', '.join([*plan.names, 'verifier'])}, with its environment "
            "and command; the launchers' programs forked by the warm zygotes)",
        ]

    def run(self, execution: Execution) -> int | None:
        cluster = warm.WarmCluster(execution.environment, execution.plan.names, root=execution.root)
        execution.ran = True
        outcome = cluster.run(collects=execution.plan.collects)
        execution.status = outcome.status
        execution.verdict = warm.verdict_of(outcome)
        execution.logs = outcome.logs if execution.plan.collects else {}
        execution.timed_logs = outcome.timed
        execution.collected = True
        return None


@dataclass(frozen=True)
class ReadVerdict:
    """The verdict as data (the verifier's record: each worker's status, metrics and problems) and
    the workers' logs, read back once the cluster has stopped; with --junit, that verdict as JUnit XML."""

    junit: str | None
    # Run whatever the end, even after a step that ended the run (or Ctrl-C).
    always = True

    def lines(self, plan, _environ) -> list[str]:
        logs = " ".join(["verifier", *(plan.names if plan.collects else [])])
        written = f", written as JUnit XML to {self.junit}" if self.junit else ""
        return [
            f"docker compose logs --no-color --no-log-prefix SERVICE, each of {logs} (the verdict's record{written})"
        ]

    def run(self, execution: Execution) -> int | None:
        verdict.read_back(execution, self.junit)
        return None


@dataclass(frozen=True)
class Report:
    """The run's report (tfcluster/report/): what its containers left kept in the run's folder
    (record/), and report.html made of it there, or beside --junit's file; its path said last."""

    junit: str | None
    page: str | None = None  # --report's file, if given.
    always = True

    def target(self, plan, root: Path) -> Path:
        """--report's file; else beside --junit's, as FILE.html (not beside a device such as
        /dev/null); else the run's folder. The files given are absolute already (plan.output_path)."""
        if self.page:
            return Path(self.page)
        junit = Path(self.junit) if self.junit else None
        if junit is not None and (junit.is_file() or not junit.exists()):
            return junit.with_suffix(".html")
        return root / plan.folder / report.PAGE

    def lines(self, plan, _environ) -> list[str]:
        source = (
            "the warm run's output" if plan.warm else "docker inspect and docker logs --timestamps of its containers"
        )
        shown = self.target(plan, Path("."))
        return [f"{source}, kept in {plan.folder}/{report.RECORD}/; the run's report written to {shown}"]

    def run(self, execution: Execution) -> int | None:
        if not execution.ran:
            return None
        plan = execution.plan
        folder = execution.root / plan.folder
        try:
            if execution.collected:
                report.keep_logs(folder, plan.name, execution.timed_logs, {})
            else:
                report.keep(folder, plan.name)
            execution.report = str(report.write(folder, self.target(plan, execution.root)).resolve())
        except Exception as error:  # noqa: BLE001
            # The verdict stands without its pictures: say why there are none.
            say(f"report: not written: {error}")
            return None
        say(f"report: {execution.report}")
        return None


def dry_environment(plan) -> dict[str, str]:
    """What the run would give the set-up and Compose, as the dry run shows it: a baked image's
    name, known only once the set-up has built what it is named after, is shown as a pattern."""
    return plan.environment(build.UNKNOWN_TAG if plan.bakes and plan.project.tag is None else None)


def dry_variables(plan, environ) -> dict[str, str]:
    """The variables the dry run interpolates the Compose files with: .env, then the environment."""
    return {**composefiles.dotenv(paths.ROOT / ".env"), **environ, **dry_environment(plan)}


def of(plan) -> list:
    """The plan's steps, in the order they run."""
    written = {name: text for name, text in plan.written().items() if text is not None}
    steps: list = [WriteFiles(written), SetUp(tuple(plan.setup_options()))]
    if plan.bakes:
        steps.append(Bake())
    sources = plan.bind_sources()
    if sources:
        steps.append(CheckMounts(sources))
    if plan.warm:
        return [*steps, WarmRun(), ReadVerdict(plan.junit), Report(plan.junit, plan.report)]
    down = Compose(DOWN, unless=NOTHING_LEFT)
    if plan.bakes:
        # Compose's files name the baked image, known only once it is built: `down` after it, then
        # the earlier baked images its containers held.
        steps += [CheckName(), down, RemoveSuperseded()]
    else:
        # The last run's containers are taken down while the set-up runs: the claim has just checked
        # that no other checkout's carry the name, and CheckName checks again before `up`.
        steps.insert(1, Begin(down))
        steps += [Finish(down), CheckName()]
    steps += [Up(), Compose(STOP, unless=NOTHING_RUNNING, ending=ENDING), CheckName(after=True)]
    if plan.junit or plan.collects:
        steps.append(ReadVerdict(plan.junit))
    return [*steps, Report(plan.junit, plan.report)]

"""The keeper: when a worker fails, it restarts the whole cluster, up to a limit.

`python -m trainer.keeper`, the `keeper` service of compose.recovery.yaml. Why a service of its own:
TensorFlow rejects a restarted worker as a new incarnation unless every worker restarts, and
Docker never restarts a container stopped by `docker kill` (a manual stop), so restart policies
alone cannot bring a cluster back. The keeper watches the project's worker containers (label
`tfcluster.role=worker`) through the Docker API; when one ends with a failure, it kills the
others and starts them all again, and they resume from the chief's newest checkpoint
(trainer/training/checkpoints.py). A network shaper (label `tfcluster.role=shaper`,
compose.network.yaml) lives in its worker's network namespace, which a restarted worker does not
keep: the keeper stops the shapers with the workers and starts them again after, into the new
namespaces, where they shape and measure the links again before the workers train. After
TF_RESTART_LIMIT restarts it stops every worker and gives up.

It judges from the containers' states, not from the events themselves: an event only wakes it,
so a death it caused itself, or one it learned of twice, cannot make it act twice. What it did
goes to the results directory as `keeper.status`/`.log`/`.lock` (trainer/contract/resultsdir.py), where the
verifier waits for it before judging the workers.

Every wait is bounded: for a worker to die, by the whole run's deadline (each run of the cluster
may take its join and run deadlines, as the verifier counts them); for a killed worker to stop,
by KILL_WAIT.

Exit codes: 0 every worker finished well; 8 it gave up (limit reached, a failure a restart cannot
cure, such as a configuration error, or a wait past its bound); 2 bad configuration; 143 stopped
by a signal.
"""

import contextlib
import dataclasses
import datetime
import signal
import sys
import threading
import time

import docker
import docker.errors
import requests.exceptions

from trainer.contract.console import show
from trainer.contract.exitcodes import ExitCode
from trainer.contract.resultsdir import Recorder

ROLE_LABEL = "tfcluster.role=worker"
SHAPER_LABEL = "tfcluster.role=shaper"
# How long a SIGKILLed worker may take to be reported stopped: the engine's own work, seconds at most.
KILL_WAIT = 30
PROJECT_LABEL = "com.docker.compose.project"
NAME = "keeper"
# Failures a restart would only repeat: the worker's own verdict on its configuration or result.
NOT_RESTARTABLE = {
    ExitCode.CONFIG_ERROR: "a configuration error",
    ExitCode.TRAINING_CHECK_FAILED: "a failed check",
    # The same program on the same limit runs out of memory again: raise TF_WORKER_MEMORY instead.
    ExitCode.OUT_OF_MEMORY: "out of memory",
    # The same checkpoint or log fills the same volume again: raise TF_CHECKPOINTS_SIZE or TF_RESULTS_SIZE.
    ExitCode.VOLUME_FULL: "a full volume",
}


@dataclasses.dataclass(frozen=True)
class WorkerState:
    name: str
    running: bool
    exit_code: int | None  # None while it runs, or before it first started.
    oom_killed: bool
    finished_at: str = ""  # Docker's RFC 3339 time, its fraction padded so that it sorts as text.

    def describe(self) -> str:
        if self.oom_killed:
            return f"exited {self.exit_code} (killed: out of memory)"
        if self.exit_code is not None and self.exit_code - 128 in _SIGNALS:
            return f"exited {self.exit_code} (killed by {_SIGNALS[self.exit_code - 128]})"
        return f"exited {self.exit_code}"


# Exit codes above 128 name a signal only when there is one of that number (255 is no signal).
_SIGNALS = {number.value: number.name for number in signal.Signals}


def _seconds(moment: str) -> float | None:
    """Docker's RFC 3339 time (as `_sortable` pads it) as seconds since the epoch, or None."""
    try:
        whole = datetime.datetime.fromisoformat(moment[:26]).replace(tzinfo=datetime.UTC)
    except ValueError:
        return None
    return whole.timestamp()


def _sortable(moment: str) -> str:
    """Docker drops trailing zeros from the nanoseconds; put them back, so text order is time order."""
    head, _, fraction = moment.rstrip("Z").partition(".")
    return f"{head}.{fraction.ljust(9, '0')}"


class Keeper:
    def __init__(
        self,
        client: docker.DockerClient,
        project: str,
        *,
        limit: int,
        recorder: Recorder | None,
        deadline: float | None = None,
    ):
        self._client = client
        self._filters = {"label": [f"{PROJECT_LABEL}={project}", ROLE_LABEL]}
        self._shaper_filters = {"label": [f"{PROJECT_LABEL}={project}", SHAPER_LABEL]}
        self._limit = limit
        self._recorder = recorder
        # Wall-clock seconds: the engine's event stream ends there (its `until`).
        self._deadline = deadline
        self.restarts: list[dict] = []

    def say(self, line: str) -> None:
        show(f"keeper | {line}\n", self._recorder)

    def run(self) -> int:
        # Subscribed before the first look, so no death falls between the two.
        filters = {**self._filters, "type": "container", "event": "die"}
        bound = {"until": int(self._deadline)} if self._deadline else {}
        events = self._client.events(decode=True, filters=filters, **bound)
        try:
            workers = self._workers()
            if not workers:
                self.say(f"no worker containers (label {ROLE_LABEL}) in this project: nothing to keep")
                return ExitCode.CONFIG_ERROR
            self.say(
                f"keeping {len(workers)} workers ({', '.join(sorted(w.name for w in self._states(workers)))}), "
                f"up to {self._limit} restart(s) of the whole cluster"
            )
            while True:
                outcome = self._assess()
                if outcome is not None:
                    return outcome
                # Blocks until some worker dies; then it looks again at all of them.
                if next(events, None) is None:
                    if self._deadline and time.time() >= self._deadline - 1:
                        self.say("gave up: the run's deadline passed with workers still running; stopping every worker")
                        self._kill_all(self._workers())
                    else:
                        self.say("gave up: the Docker engine closed its event stream")
                    return ExitCode.GAVE_UP
        finally:
            events.close()

    def _assess(self) -> int | None:
        # One listing (which inspects every container) serves the whole decision.
        containers = self._workers()
        states = self._states(containers)
        # First the one that failed first: the others usually only lost it.
        failed = sorted(
            (state for state in states if not state.running and state.exit_code not in (None, 0)),
            key=lambda state: state.finished_at,
        )
        if not failed:
            if all(state.exit_code == 0 for state in states):
                self.say(f"every worker finished well, after {len(self.restarts)} restart(s)")
                return ExitCode.OK
            return None
        what = ", ".join(f"{state.name} {state.describe()}" for state in failed)
        incurable = [NOT_RESTARTABLE[s.exit_code] for s in failed if s.exit_code in NOT_RESTARTABLE]
        if incurable:
            self.say(f"gave up: {what}: {incurable[0]}, which a restart would only repeat; stopping every worker")
            self._kill_all(containers)
            return ExitCode.GAVE_UP
        if len(self.restarts) >= self._limit:
            self.say(
                f"gave up: {what}, after {len(self.restarts)} restart(s) (TF_RESTART_LIMIT={self._limit}); "
                "stopping every worker"
            )
            self._kill_all(containers)
            return ExitCode.GAVE_UP
        self.restarts.append(
            {
                "failed": {state.name: state.exit_code for state in failed},
                "reason": what,
                # When the first failed, for the verdict's account of a network fault before it.
                "failed_at": _seconds(failed[0].finished_at),
            }
        )
        shapers = self._client.containers.list(all=True, filters=self._shaper_filters, ignore_removed=True)
        also = f" and their {len(shapers)} network shapers" if shapers else ""
        self.say(f"restart {len(self.restarts)} of at most {self._limit}: {what}; restarting every worker{also}")
        self._kill_all(containers + shapers)
        since = time.time()
        # The workers first: each shaper joins its worker's new network namespace as it starts.
        for container in containers + shapers:
            container.start()
            # `docker compose up` does not follow a container that something else started again.
            threading.Thread(target=self._echo, args=(container, since), daemon=True).start()
        return None

    def _echo(self, container, since: float) -> None:
        """Shows a restarted worker's output as this service's, until the worker ends."""
        name = container.labels.get("com.docker.compose.service", container.name)
        with contextlib.suppress(docker.errors.DockerException):
            for line in container.logs(stream=True, follow=True, since=since):
                sys.stdout.write(f"{name} | {line.decode(errors='replace')}")
                sys.stdout.flush()

    def _workers(self):
        # A container removed between listing and inspecting is gone from the cluster: skip it.
        return self._client.containers.list(all=True, filters=self._filters, ignore_removed=True)

    def _states(self, containers) -> list[WorkerState]:
        states = []
        for container in containers:
            state = container.attrs["State"]
            started = not state.get("StartedAt", "").startswith("0001-")
            states.append(
                WorkerState(
                    name=container.labels.get("com.docker.compose.service", container.name),
                    running=state["Running"],
                    exit_code=None if state["Running"] or not started else state["ExitCode"],
                    oom_killed=state.get("OOMKilled", False),
                    finished_at=_sortable(state.get("FinishedAt", "")),
                )
            )
        return states

    def _kill_all(self, containers) -> None:
        """SIGKILL, since TensorFlow ignores SIGTERM; then wait until each has really stopped."""
        for container in containers:
            with contextlib.suppress(docker.errors.APIError):  # It had already stopped.
                container.kill()
        for container in containers:
            try:
                container.wait(condition="not-running", timeout=KILL_WAIT)
            except requests.exceptions.RequestException:
                name = container.labels.get("com.docker.compose.service", container.name)
                raise docker.errors.DockerException(f"{name} was not stopped {KILL_WAIT}s after SIGKILL") from None

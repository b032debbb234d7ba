"""The training program, as the launcher runs it: started (perhaps held at the start gate), its
output forwarded line by line, stopped on demand, waited for, and its resource usage reported.

Stopping is SIGTERM to the program's process group, then SIGKILL `stop_grace` seconds later
(`TF_STOP_GRACE`, trainer/contract/settings.py): TensorFlow's preemption notifier swallows SIGTERM,
and a PreemptionCheckpointHandler saves in that time. The launcher stops the program on a lost
peer, at the run deadline, and on its own SIGTERM or SIGINT: as the image's PID 1 (docker/Dockerfile's
exec-form ENTRYPOINT) it receives `docker compose stop`'s SIGTERM and passes it on
(trainer/launcher/supervisor.py, `handle_signal`). Docker SIGKILLs the launcher and all with it
when Compose's `stop_grace_period` (10 s unless set) has passed, so that must exceed the grace.
"""

import contextlib
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

from trainer.contract import gate, observing, stacks
from trainer.contract.console import Log, show
from trainer.contract.settings import LaunchSettings
from trainer.contract.usage import Usage
from trainer.launcher import cgroup, forked, noise
from trainer.launcher.activity import Activity, signal_catchers
from trainer.launcher.observing import ObservedRecord

# This project's own programs wait at the start gate (trainer/contract/gate.py) after their imports.
GATED_MODULES = frozenset({"trainer.training", "trainer.benchmark.allreduce"})
# How long the output of a program that has ended may still take to drain.
OUTPUT_DRAIN = 5.0
# A stack dump is out once the program has printed nothing for DUMP_QUIET, or after DUMP_WAIT.
DUMP_QUIET = 0.5
DUMP_WAIT = 5.0


def honours_gate(command: list[str]) -> bool:
    return (
        len(command) >= 3
        and os.path.basename(command[0]).startswith("python")
        and command[1] == "-m"
        and command[2] in GATED_MODULES
    )


def _progress(recorder: Log | None) -> dict[str, str]:
    """Where the observer keeps the training's progress (trainer/observer/progress.py), beside the
    results recorder's files, made fresh: one left by an earlier run of this worker must time nothing."""
    path = getattr(recorder, "progress", None)
    if path is None:
        return {}
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
    return {observing.PROGRESS: str(path)}


class Program:
    """One run of `command`, in a process group of its own so that stopping it reaches its children."""

    def __init__(
        self,
        *,
        command: list[str],
        environment: dict[str, str],
        recorder: Log | None,
        # The dataclass holds each setting's default as a class attribute: `TF_STOP_GRACE`'s.
        stop_grace: float = LaunchSettings.stop_grace,
        # A warm run's: forked by the worker's zygote (trainer/launcher/forked.py), or else started cold.
        forking: forked.Forking | None = None,
        say: Callable[[str], object] = print,
    ):
        self._command = command
        self._forking = forking
        self._say = say
        self._environment = environment
        self._recorder = recorder
        self._stop_grace = stop_grace
        self._process: subprocess.Popen | None = None
        self._forwarder: threading.Thread | None = None
        self._started = 0.0
        # Set by stop(); a program still starting when the signal came is stopped once it exists.
        self._stop_requested = False
        self.activity: Activity | None = None  # Made with the process: what the stall watchdog judges.
        # TensorFlow's start-up notices are hidden while the program runs quiet (trainer/launcher/noise.py).
        self._hide_startup_lines = noise.runs_quiet(environment)
        self._observed: ObservedRecord | None = None  # Made with the process (trainer/launcher/observing.py).

    def start(self, *, variables: dict[str, str] | None = None, pass_fds: tuple[int, ...] = ()) -> None:
        self._observed = ObservedRecord()
        # Every Python program of the image then dumps its stack on request (trainer/contract/stacks.py),
        # and its observer records its strategy and model states (trainer/observer/).
        environment = {**self._environment, stacks.VARIABLE: "1", **self._observed.variables()}
        environment |= _progress(self._recorder) | (variables or {})
        self._process = None
        if self._forking is not None:
            self._process = forked.start(self._command, environment, pass_fds, self._forking, self._say)
        if self._process is None:
            self._process = subprocess.Popen(
                self._command,
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,
                pass_fds=pass_fds,
            )
        _first_for_the_oom_killer(self._process.pid)
        self._started = time.monotonic()
        self.activity = Activity(self._process.pid, started=self._started)
        self._forwarder = threading.Thread(target=self._forward, daemon=True, name="forwarder")
        self._forwarder.start()
        if self._stop_requested:
            self.stop()

    @contextlib.contextmanager
    def held_at_gate(self) -> Iterator[None]:
        """Starts the program now, held at the start gate while the block runs (the workers meet).

        It imports TensorFlow meanwhile. If the block ends normally the gate opens and the program
        trains; if it raises, the program ends without ever touching the cluster.
        """
        gate_read, gate_write = os.pipe()
        self.start(variables={gate.VARIABLE: str(gate_read)}, pass_fds=(gate_read,))
        os.close(gate_read)
        try:
            yield
        except BaseException:
            os.close(gate_write)  # The program reads the end of the pipe and gives up...
            self.kill()  # ...or is made to.
            raise
        if not self.has_ended():
            with contextlib.suppress(BrokenPipeError):  # It ended meanwhile: its exit tells why.
                os.write(gate_write, gate.GO)
        os.close(gate_write)

    def has_ended(self) -> bool:
        return self._process is not None and self._process.poll() is not None

    def stop(self) -> None:
        """SIGTERM to the program's process group, and SIGKILL if it is still there `stop_grace` seconds later."""
        self._stop_requested = True
        process = self._process
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        timer = threading.Timer(self._stop_grace, _kill_group, args=(process.pid,))
        timer.daemon = True
        timer.start()

    def kill(self) -> None:
        """Ends a program held at the gate at once: it has only been importing, so nothing is lost."""
        _kill_group(self._process.pid)
        self.wait()

    def wait(self) -> int:
        exit_code = self._process.wait()
        # Whatever it left running in its process group (a data loader, a shell's child) would keep
        # its output open, and so this wait, until the run deadline: the program has ended, so do they.
        _kill_group(self._process.pid)
        # Every line it printed is out before the launcher's own; one that escaped the group (its
        # own session) is not waited for beyond a moment.
        self._forwarder.join(timeout=OUTPUT_DRAIN)
        self._observed.copy(lambda line: show(line, self._recorder))
        return exit_code

    def dump_stacks(self) -> list[int]:
        """Asks every Python process of the program for its stack, without stopping it; returns those asked.

        Returns once the dumps are out: when the program has printed nothing new for a moment.
        """
        asked = signal_catchers(self._process.pid, stacks.SIGNAL)
        deadline = time.monotonic() + DUMP_WAIT
        printed = -1
        while asked and time.monotonic() < deadline and printed != self.activity.lines:
            printed = self.activity.lines
            time.sleep(DUMP_QUIET)  # Output, unlike an exit, has no event that says it is complete.
        return asked

    def usage(self) -> Usage:
        """How long the program ran and what it used: what the containers' limits are sized by (compose.yaml)."""
        forked_usage = getattr(self._process, "usage", None)  # The zygote reaped a forked program.
        if forked_usage is not None:
            cpu_seconds, max_rss_kib = forked_usage["cpu_seconds"], forked_usage["max_rss_kib"]
        else:
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu_seconds, max_rss_kib = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
        return Usage(
            wall_seconds=time.monotonic() - self._started,
            cpu_seconds=cpu_seconds,
            cpu_limit=cgroup.cpu_limit(),
            peak_memory=max_rss_kib * 1024,  # Linux gives it in KiB.
        )

    def _forward(self) -> None:
        for line in self._process.stdout:
            self.activity.printed()
            if not (self._hide_startup_lines and noise.is_startup_line(line)):
                show(line, self._recorder)


def _kill_group(process_group: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # It ended within the grace period.
        os.killpg(process_group, signal.SIGKILL)


# The program's oom_score_adj: at a container's memory limit the kernel kills the process with
# the highest score, its memory plus this share of the limit in thousandths; half the limit puts
# the program before its launcher, which must live to say what happened. A launcher killed in its
# place (seen once in the suite, at a 150 MiB limit) left its worker an exit 137 and no word of why.
# Raising it needs no privilege; a child the program starts inherits it.
OOM_SCORE_ADJ = 500


def _first_for_the_oom_killer(pid: int) -> None:
    # Not Linux, or the program already gone: nothing to order.
    with contextlib.suppress(OSError), open(f"/proc/{pid}/oom_score_adj", "w") as adjustment:
        adjustment.write(f"{OOM_SCORE_ADJ}\n")

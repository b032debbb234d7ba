"""Cancelled means stopped: what a run does with SIGINT, SIGTERM and SIGHUP, whoever gets them.

A cancelled CI job sends its step SIGTERM (GitHub Actions SIGINT first); Ctrl-C sends SIGINT to
the whole foreground process group; a runner may signal only the step's own process. In every
case the run must stop its cluster, write a failing report and exit 128 + the signal, never leave
a child training behind. So the run's children that do the work (scripts/setup, `docker build`,
`docker compose up`) are started in process groups of their own, which a terminal's Ctrl-C does
not reach: the run alone decides what they get. A signal ends the wait for a child with
`Cancelled`; the child is passed SIGTERM once (Compose stops its containers gracefully on it, the
set-up's steps end) and given `grace` seconds before SIGKILL; then the run tears its cluster down
(tfcluster/cluster/api.py).
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

# SIGPIPE too, but only once `reader_gone` has said that the reader of the run's own output went
# away (`scripts/run | head`), as a program that does not catch it dies of it. Any other write to
# a closed pipe (`docker build -`'s stdin, a library user's socket) raises its BrokenPipeError where
# it was written, as Python's default has it, and cancels nothing.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)
_readers_gone = threading.Event()
# How long a cancelled child (Compose's `up`, the set-up, a build) is given after SIGTERM: inside
# GitHub's cancel budget (SIGTERM 7.5 s after its SIGINT, SIGKILL 2.5 s later), since the stop and
# `down` still follow. Compose's own stop of its containers takes about 4 s (the launchers end
# within TF_STOP_GRACE + 2 s); if it is cut short, the run's own `stop` finishes it. Whatever a
# SIGKILL still leaves, the next CI job's start removes (tfcluster/cluster/orphans.py).
GRACE = 5.0


class Cancelled(SystemExit):
    """The run was signalled: its exit status is 128 + the signal, as a shell reports it."""

    def __init__(self, signal_number: int):
        super().__init__(128 + signal_number)
        self.signal_number = signal_number

    @property
    def status(self) -> int:
        return 128 + self.signal_number

    @property
    def name(self) -> str:
        return described(self.signal_number)


def described(signal_number: int) -> str:
    """The signal's name, and for SIGPIPE what it means here."""
    name = signal.Signals(signal_number).name
    return f"{name} (the reader of its output is gone)" if signal_number == signal.SIGPIPE else name


class Outliving:
    """A standard stream that outlives its reader: once the reader has gone, what is written goes
    to /dev/null and the run is told (reader_gone), rather than BrokenPipeError raised wherever the
    run was, in its clean-up too. Text or bytes: the run's own prints, and the threads that copy
    its children's output."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str | bytes) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            reader_gone(self._stream)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            reader_gone(self._stream)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def outliving_readers() -> Iterator[None]:
    """sys.stdout and sys.stderr outlive their readers for the block (a run's, from the command line)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Outliving(sys.stdout), Outliving(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def reader_gone(stream) -> None:
    """What a writer of the run's output does when `stream`'s reader has gone: the rest is written
    to /dev/null, so that no child ever blocks on a full pipe and nothing is written there again,
    and the run is told as by SIGPIPE. The write's own SIGPIPE may have been handled already, as
    not the run's (`stopped_by`), and it does not end a wait of the main thread's from another
    thread: this one is sent to the main thread, where the run waits. Where no run handles it, it
    is ignored (Python's default) and only the output is dropped."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError):
        pass  # Not a file's stream: nothing to point elsewhere.
    finally:
        os.close(devnull)
    _readers_gone.set()
    signal.pthread_kill(threading.main_thread().ident, signal.SIGPIPE)


def stopped_by(signal_number: int) -> bool:
    """Whether the signal stops the run: any of SIGNALS, but SIGPIPE only for its output's reader gone."""
    return signal_number != signal.SIGPIPE or _readers_gone.is_set()


def _raise(signal_number, _frame):
    raise Cancelled(signal_number)


class Watch:
    """SIGNALS handled for a whole run, from its first step to the end of its clean-up, with no
    moment between the two where one would be lost or end the process unhandled: until `shield()`
    (or the first signal), a signal raises Cancelled in the main thread; after, it is noted in
    `late` and the clean-up goes on, each step of it bounded. From another thread nothing changes."""

    def __init__(self):
        self.raising = True
        self.late: int | None = None
        self._previous: dict = {}

    def __enter__(self) -> "Watch":
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._handle) for number in SIGNALS}
        return self

    def __exit__(self, *_exception) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        _readers_gone.clear()  # Told; a later run in this process writes to /dev/null from the start.

    def shield(self) -> None:
        self.raising = False

    def _handle(self, signal_number, _frame):
        if not stopped_by(signal_number):
            return
        if self.raising:
            self.raising = False  # Once: what follows is the clean-up.
            raise Cancelled(signal_number)
        if self.late is None:
            self.late = signal_number


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """While the run cleans up: further signals are let pass, not raised, so that tearing down is
    not itself cut short; each step of it is bounded instead."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # A handler that does nothing, not SIG_IGN: an ignored signal stays ignored in the programs
    # the teardown starts (`docker compose down`), a handled one is theirs again.
    previous = {number: signal.signal(number, lambda _number, _frame: None) for number in SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run(command: list[str], *, grace: float = GRACE, **options) -> subprocess.CompletedProcess:
    """`subprocess.run(command)` in a process group of its own; on Cancelled (or any exception)
    the group is sent SIGTERM, given `grace` seconds, then SIGKILL, and the exception goes on."""
    options.setdefault("stdin", subprocess.DEVNULL)  # A background group must not read the terminal.
    process = subprocess.Popen(command, process_group=0, **options)
    try:
        return subprocess.CompletedProcess(command, process.wait())
    except BaseException:
        with shielded():
            stop(process, grace)
        raise


def stop(process: subprocess.Popen, grace: float) -> None:
    """SIGTERM to the process's group, then SIGKILL after `grace` seconds if it has not ended."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    # What the group's leader left behind (a step of the set-up, say) goes too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)

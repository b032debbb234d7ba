"""The set-up's commands: each in a process group of its own, and all of them stopped at once.

On a new machine three steps run at once (machine.py), and one that fails must end the others and
whatever they started (pip, apt-get under mmdebstrap, a docker pull) rather than leave them
downloading. So each command is started in a group of its own, which `stop` ends whole, and once
stopping no command starts. A signal ends the set-up the same way: `Signalled` is raised in the
main thread (machine.py), whose cleanup calls `stop`.
"""

import contextlib
import os
import shlex
import signal
import subprocess
import threading

# How long a stopped command has to end on SIGTERM before SIGKILL.
GRACE = 5.0


class CommandFailed(Exception):
    """A command exited with a failure; it has said why on stderr, or `output` holds what it said."""

    def __init__(self, command: list[str], status: int, output: str = ""):
        super().__init__(f"{named(command)} exited {status}")
        self.command = command
        self.status = status
        self.output = output


def named(command: list[str]) -> str:
    """The command as a person would name it: `pip download` for `/usr/bin/python3 -m pip download ...`."""
    words = command[2:] if len(command) > 2 and command[1] == "-m" else [os.path.basename(command[0]), *command[1:]]
    return shlex.join(words[:2])


class Stopping(Exception):
    """A command asked for once the set-up is stopping: it is not started."""


class Children:
    """The live commands of one set-up, in groups of their own."""

    def __init__(self):
        self._live: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._stopping = False

    def start(self, command: list[str], **options) -> subprocess.Popen:
        options.setdefault("stdin", subprocess.DEVNULL)  # A group in the background must not read the terminal.
        with self._lock:
            if self._stopping:
                raise Stopping(command[0])
            process = subprocess.Popen(command, process_group=0, **options)
            self._live.add(process)
        return process

    def finished(self, process: subprocess.Popen) -> None:
        """`process` is no longer waited on: forgotten if it has ended; one still running (its wait
        cut short by a signal's exception) stays, for `stop` to end."""
        if process.poll() is None:
            return
        with self._lock:
            self._live.discard(process)

    def run(self, command: list[str], *, check: bool = True, capture: bool = False, **options) -> str:
        """Runs `command` to its end and returns its stdout, with `capture` (else nothing: its
        output is the terminal's). A failure raises CommandFailed, with its stderr when captured."""
        if capture:
            options.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        process = self.start(command, **options)
        try:
            output, errors = process.communicate()
        finally:
            self.finished(process)
        if self._stopping:  # Stopped, it says nothing of what it was asked: the step ends here.
            raise Stopping(command[0])
        if check and process.returncode != 0:
            raise CommandFailed(command, process.returncode, errors or "")
        return output or ""

    def succeeds(self, command: list[str], **options) -> bool:
        """Whether `command` exits 0; what it says is dropped."""
        options.update(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        process = self.start(command, **options)
        try:
            status = process.wait()
        finally:
            self.finished(process)
        if self._stopping:
            raise Stopping(command[0])
        return status == 0

    def stop(self) -> None:
        """SIGTERM to every live command's group, SIGKILL to those still there after GRACE; no
        command starts after this."""
        with self._lock:
            self._stopping = True
            live = list(self._live)
        for process in live:
            _signal(process, signal.SIGTERM)
        for process in live:
            try:
                process.wait(timeout=GRACE)
            except subprocess.TimeoutExpired:
                _signal(process, signal.SIGKILL)
                process.wait()
            # What the group's leader left behind goes too.
            _signal(process, signal.SIGKILL)


def _signal(process: subprocess.Popen, number: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, number)

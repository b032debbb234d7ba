"""The program of a warm run: forked by the worker's zygote, and seen by the launcher as its own child.

In a warm worker (trainer/zygote/, trainer/contract/zygote.py) the launcher asks the zygote to
fork the program instead of starting it. It gets back what it uses of a `subprocess.Popen`: the
pid (a process group of its own, which the launcher signals as before), the output (a pipe the
launcher made and sent along), and the exit status and resource usage, which the zygote reports
on the connection when it has reaped the child. Closing the connection kills the program: the
launcher never leaves one behind, whatever ends it.
"""

import contextlib
import dataclasses
import os
import socket
import threading
import time
from collections.abc import Callable

from trainer.contract import zygote as protocol

# Between two attempts to reach a zygote that is not there yet (an exec of itself takes no longer).
RETRY = 0.05


@dataclasses.dataclass(frozen=True)
class Forking:
    """A warm run's: its zygote's socket, and how long a zygote still importing (the first run) may take."""

    within: float
    socket_path: str = protocol.SOCKET


def start(
    command: list[str], environment: dict[str, str], pass_fds: tuple[int, ...], forking: Forking, say
) -> "ForkedProcess | None":
    """The program forked by the zygote, its output into a pipe of ours; None, said why: start it cold."""
    output_read, output_write = os.pipe()
    try:
        process, cold = fork(
            command,
            environment,
            {1: output_write, 2: output_write, **{descriptor: descriptor for descriptor in pass_fds}},
            timeout=forking.within,
            say=say,
            socket_path=forking.socket_path,
        )
    finally:
        os.close(output_write)
    if process is None:
        os.close(output_read)
        say(f"starts its program cold: {cold}")
        return None
    process.stdout = open(output_read, encoding="utf-8", errors="replace")  # noqa: SIM115 - the pipe's life.
    say(f"forked its program from the warm zygote (pid {process.pid})")
    return process


class ForkedProcess:
    """A child of the zygote: `pid`, `stdout`, `poll()`, `wait()`, and `usage` once it has ended."""

    def __init__(self, connection: socket.socket, reader: protocol.Reader, pid: int, stdout):
        self._connection = connection
        self._reader = reader
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self.usage: dict | None = None
        self._ended = threading.Event()
        threading.Thread(target=self._wait_for_exit, daemon=True, name="zygote").start()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self) -> int:
        self._ended.wait()
        return self.returncode

    def _wait_for_exit(self) -> None:
        try:
            message = self._reader.next()
        except (OSError, ValueError):
            message = None
        if message and "exited" in message:
            self.returncode = os.waitstatus_to_exitcode(message["exited"])
            self.usage = message.get("rusage")
        else:  # The zygote itself is gone, and its children with it (it is the container's PID 1).
            self.returncode = -9
        with contextlib.suppress(OSError):
            self._connection.close()
        self._ended.set()


def fork(
    command: list[str],
    environment: dict[str, str],
    descriptors: dict[int, int],
    *,
    timeout: float,
    say: Callable[[str], None],
    socket_path: str = protocol.SOCKET,
) -> tuple[ForkedProcess | None, str | None]:
    """Asks the zygote for the program; returns it, or (None, why it starts cold).

    `descriptors` maps each number the program is to have to this launcher's descriptor for it.
    Waits up to `timeout` for a zygote still importing (the first run) or restarting.
    """
    deadline = time.monotonic() + timeout
    key = protocol.key_of(environment)
    restarted = False
    while True:
        connection = _connect(socket_path, deadline)
        if connection is None:
            return None, f"no zygote answered at {socket_path} within {timeout:g} s"
        request = {"argv": command, "env": environment, "cwd": os.getcwd(), "fds": list(descriptors)}
        try:
            protocol.send(connection, request, list(descriptors.values()))
            connection.settimeout(max(0.1, deadline - time.monotonic()))
            reader = protocol.Reader(connection)
            answer = reader.next()
            connection.settimeout(None)
        except (OSError, ValueError) as error:
            connection.close()
            return None, f"the zygote did not answer ({error})"
        if answer is None:
            connection.close()
            return None, "the zygote closed the connection without an answer"
        if "restarting" in answer:
            connection.close()
            if restarted:  # It restarted for this run once already: its key cannot be the run's.
                return None, f"the zygote restarted and still differs: {answer['restarting']}"
            say(f"the warm zygote restarts for this run: {answer['restarting']}")
            restarted = True
            continue
        if "cold" in answer:
            connection.close()
            return None, answer["cold"]
        if answer.get("key") != key:
            connection.close()  # ...which kills the child.
            differences = protocol.key_differences(answer.get("key") or {}, key)
            return None, f"the zygote forked with another key ({'; '.join(differences)})"
        return ForkedProcess(connection, reader, answer["started"], None), None


def _connect(path: str, deadline: float) -> socket.socket | None:
    """The zygote's socket; absent or refusing only while a container starts or a zygote execs itself."""
    while True:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(path)
            return connection
        except (FileNotFoundError, ConnectionRefusedError):
            connection.close()
            if time.monotonic() >= deadline:
                return None
            time.sleep(RETRY)  # No event tells that a socket file has appeared; this wait is short.

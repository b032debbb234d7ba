"""The zygote's loop: one thread, one selector over its socket, its launchers' connections and its children.

A single thread on purpose: a waiting thread per child would be a thread of ours at the next fork.
Each child's end is an event (SIGCHLD, through the wake-up descriptor), as is a launcher's going away (its
connection reads end-of-file: the child is killed, a run without its launcher must not train on),
and SIGTERM: it is passed to every live launcher, which stops its program as it would in a cold
container, and the zygote ends once they have gone, within `STOP_WAIT`. As the container's PID 1
it also reaps whatever the kernel hands it: a program's own children that outlived it would
otherwise stay zombies, run after run, until the container's pids limit.
"""

import contextlib
import dataclasses
import fcntl
import json
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable

from trainer.contract import zygote as protocol
from trainer.zygote import child, threads

# How long the launchers of a stopping zygote have to end their runs (Compose's stop_grace_period
# of a worker is 10 s by default; the launcher's own grace is 2 s).
STOP_WAIT = 8.0
# How long a connection may take to send its request once accepted.
REQUEST_WAIT = 5.0


@dataclasses.dataclass(frozen=True)
class Fork:
    """What a child returns with out of `serve`, to become the program (trainer/zygote/__main__.py)."""

    command: child.Command
    environment: dict[str, str]
    cwd: str


@dataclasses.dataclass
class _Run:
    connection: socket.socket
    pid: int
    launcher: int  # The launcher's pid (SO_PEERCRED), told of a SIGTERM.


def listening_socket(path: str) -> socket.socket:
    """The socket, bound before the imports so that an early launcher waits in its backlog; kept across an exec."""
    inherited = os.environ.pop(protocol.LISTENING_FD_VARIABLE, "")
    if inherited:
        listener = socket.socket(fileno=int(inherited))
        listener.set_inheritable(False)
        return listener
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    return listener


class Zygote:
    def __init__(
        self,
        listener: socket.socket,
        *,
        key: dict[str, str],
        unsafe: str | None,
        say: Callable[[str], None],
    ):
        self._listener = listener
        self._key = key
        self._unsafe = unsafe  # Why no run may be forked, if one may not.
        self._say = say
        self._selector = selectors.DefaultSelector()
        self._runs: dict[int, _Run] = {}  # By pid.
        self._stopping: float | None = None
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)

    def serve(self) -> Fork | None:
        """Serves until SIGTERM (returns None) or, in a forked child, returns what the child is to run."""
        signal.set_wakeup_fd(self._wake_write.fileno(), warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
        signal.signal(signal.SIGINT, lambda _signum, _frame: None)
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
        self._selector.register(self._listener, selectors.EVENT_READ, self._accept)
        self._selector.register(self._wake_read, selectors.EVENT_READ, self._woken)
        self._say("ready")
        while self._stopping is None or (self._runs and time.monotonic() < self._stopping + STOP_WAIT):
            for selected, _events in self._selector.select(timeout=1.0 if self._stopping else None):
                forked = selected.data(selected.fileobj)
                if forked is not None:
                    return forked
        for run in self._runs.values():
            _kill_group(run.pid)
        return None

    def _woken(self, wake: socket.socket) -> None:
        signals = b""
        with contextlib.suppress(BlockingIOError):
            signals = wake.recv(64)
        if signal.SIGCHLD in signals:
            self._reap()
        if signal.SIGTERM in signals or signal.SIGINT in signals:
            self._stopping = time.monotonic()
            self._say(f"stopping: {len(self._runs)} run(s) live")
            for run in self._runs.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(run.launcher, signal.SIGTERM)

    def _accept(self, listener: socket.socket) -> Fork | None:
        connection, _address = listener.accept()
        reader = protocol.Reader(connection)
        # A launcher sends its request as it connects; anything else must not hold up the loop.
        connection.settimeout(REQUEST_WAIT)
        try:
            request = reader.next()
            connection.settimeout(None)
        except (OSError, ValueError):  # A timeout is an OSError too.
            request = None
        if request is None or self._stopping is not None or _hung_up(connection):
            reader.close_fds()
            connection.close()
            return None
        try:
            return self._answer(connection, reader, request)
        finally:
            reader.close_fds()

    def _answer(self, connection: socket.socket, reader: protocol.Reader, request: dict) -> Fork | None:
        environment = request["env"]
        run_key = protocol.key_of(environment)
        command = child.parse(request["argv"])
        if self._unsafe or isinstance(command, str):
            return self._refuse(connection, {"cold": self._unsafe or command})
        differences = protocol.key_differences(self._key, run_key)
        if differences:
            if self._runs:  # Another run is live: it keeps its zygote, this one starts cold.
                return self._refuse(connection, {"cold": f"another run is live, and {differences[0]}"})
            self._say(f"restarting for the run's key: {'; '.join(differences)}")
            protocol.send(connection, {"restarting": "; ".join(differences)})
            connection.close()
            reader.close_fds()
            _restart(self._listener, self._key, run_key)
        unsafe = threads.unsafe_reason({})  # A thread started since: none should have been.
        if unsafe:
            return self._refuse(connection, {"cold": unsafe})
        launcher = _peer_pid(connection)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            return self._become_child(connection, reader, request, command)
        self._runs[pid] = _Run(connection, pid, launcher)
        self._selector.register(connection, selectors.EVENT_READ, lambda _c, pid=pid: self._launcher_spoke(pid))
        protocol.send(connection, {"started": pid, "key": self._key})
        return None

    def _become_child(self, connection, reader, request, command) -> Fork:
        """In the child: its own session, its descriptors in place, nothing of the zygote's left open."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        own = [self._listener, connection, self._wake_read, self._wake_write, self._selector]
        own += [run.connection for run in self._runs.values()]
        _put_in_place(reader, request["fds"], own)
        return Fork(command=command, environment=request["env"], cwd=request["cwd"])

    def _refuse(self, connection: socket.socket, answer: dict) -> None:
        self._say(f"a run starts cold: {answer['cold']}")
        with contextlib.suppress(OSError):
            protocol.send(connection, answer)
        connection.close()

    def _reap(self) -> None:
        """Every child that has ended: a run's is reported to its launcher, any other only reaped."""
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:  # None left at all.
                return
            if pid == 0:
                return
            run = self._runs.pop(pid, None)
            if run is None:
                continue
            with contextlib.suppress(KeyError):  # Unless its launcher went away first.
                self._selector.unregister(run.connection)
            usage_record = {"cpu_seconds": usage.ru_utime + usage.ru_stime, "max_rss_kib": usage.ru_maxrss}
            with contextlib.suppress(OSError):
                protocol.send(run.connection, {"exited": status, "rusage": usage_record})
            run.connection.close()

    def _launcher_spoke(self, pid: int) -> None:
        """A launcher sends nothing after its request: anything readable is its connection's end."""
        run = self._runs[pid]
        try:
            data = run.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            data = b""
        if not data:
            self._say(f"the launcher of run {pid} went away: its program is killed")
            self._selector.unregister(run.connection)
            _kill_group(pid)


def _restart(listener: socket.socket, own_key: dict[str, str], key: dict[str, str]) -> None:
    """exec's this zygote again with the run's key, its socket kept, so no launcher finds it gone."""
    # Its key from os.environ, as a launcher's own environment gives a run's: with what Python
    # itself sets at start-up (LC_CTYPE, where the locale is C), which a run's has too.
    environment = {name: value for name, value in os.environ.items() if name not in own_key}
    environment |= key
    listener.set_inheritable(True)
    environment[protocol.LISTENING_FD_VARIABLE] = str(listener.fileno())
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environment)


def _put_in_place(reader: protocol.Reader, targets: list[int], own: list) -> None:
    """The received descriptors at the numbers the program is to have them; the zygote's own closed."""
    # Above every target first, so that putting one in place clobbers none.
    lowest = max([*targets, 2]) + 1
    received = [fcntl.fcntl(descriptor, fcntl.F_DUPFD_CLOEXEC, lowest) for descriptor in reader.fds]
    reader.close_fds()
    # The zygote's own next, before a target's number could be one of theirs.
    for item in own:
        if isinstance(item, int):
            os.close(item)
        else:
            item.close()
    for target, descriptor in zip(targets, received, strict=True):
        os.dup2(descriptor, target)
    for descriptor in received:
        os.close(descriptor)


def _hung_up(connection: socket.socket) -> bool:
    """Whether the launcher has closed its end already: it asked, gave up waiting (a zygote still
    importing past its deadline) and started its program cold. Its request is still there to read,
    but a child forked for it would be a second program of its run until the loop saw the close."""
    try:
        return connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # Open, and nothing more to read: as a launcher waiting for its answer is.
    except OSError:
        return True


def _peer_pid(connection: socket.socket) -> int:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", credentials)[0]


def _kill_group(group: int) -> None:
    """SIGKILL to a run's process group, and to its first process: a child not yet past its
    `setsid` (a launcher killed just after the fork, on a busy machine) has no group of its own yet."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(group, signal.SIGKILL)


def usage_now() -> str:
    """The zygote's own footprint, for its ready line."""
    return json.dumps({"max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024})

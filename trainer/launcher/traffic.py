"""TensorFlow's own traffic while the program trains: the bytes of its connections on the workers' TensorFlow ports.

The launcher polls this namespace's TCP connections (trainer/launcher/connections.py) every
POLL_INTERVAL on a thread of its own while the program runs, and once more when it has ended, and
prints what it counted as one record into the worker's log, for the verifier's proof that
gradients crossed between the workers:

    {"event": "connections", "ports": [12345], "sent": 61234, "received": 60871, "connections": 2, "polls": 48}

or, when the kernel could not be asked, `{"event": "connections", "ports": [12345], "unavailable": "why"}`.

A connection's counters only grow, and a closed one leaves the kernel's table: so each socket
(by its cookie) keeps the largest counters any poll saw, and one a peer closed before the end
still counts with its last values. A warm worker's namespace may still hold an earlier run's
connections at the first poll, closing since that run's program ended: what they had counted then
is taken off. A connection already open then is this run's (a program quick to connect), and counts in full.
"""

import contextlib
import dataclasses
import json
import threading
from collections.abc import Callable, Collection, Iterator, Sequence

from trainer.contract.cluster import Cluster
from trainer.contract.console import Log, show
from trainer.launcher import connections
from trainer.launcher.connections import Connection

# Often enough that a connection which lives a second is seen; each poll is two short netlink dumps.
POLL_INTERVAL = 0.25


@dataclasses.dataclass(frozen=True)
class Traffic:
    """What the polls counted: bytes sent and received, connections and polls, or why nothing could be read."""

    ports: tuple[int, ...]
    sent: int = 0
    received: int = 0
    connections: int = 0
    polls: int = 0
    unavailable: str | None = None

    def event(self) -> str:
        """The record, one JSON line (without its newline)."""
        if self.unavailable is not None:
            return json.dumps({"event": "connections", "ports": list(self.ports), "unavailable": self.unavailable})
        counted = {"sent": self.sent, "received": self.received, "connections": self.connections, "polls": self.polls}
        return json.dumps({"event": "connections", "ports": list(self.ports), **counted})


def tensorflow_ports(cluster: Cluster) -> tuple[int, ...]:
    """The workers' TensorFlow ports, from their `host:port` addresses (the launchers' own ports are others)."""
    return tuple(sorted({int(address.rsplit(":", 1)[1]) for address in cluster.workers}))


class TrafficPoller:
    """Polls the connections on `ports` from start() to stop(); never raises, whatever the kernel says."""

    def __init__(
        self,
        ports: Sequence[int],
        *,
        interval: float = POLL_INTERVAL,
        read: Callable[[Collection[int]], list[Connection]] = connections.read,
    ):
        self._ports = tuple(ports)
        self._interval = interval
        self._read = read
        self._lock = threading.Lock()  # The thread polls, and so does stop() once the thread is done.
        self._before: dict[int, Connection] = {}  # An earlier run's sockets, as the first poll found them.
        self._largest: dict[int, tuple[int, int]] = {}  # Each socket's largest (sent, received) seen.
        self._polls = 0
        self._failure: str | None = None  # The first failure: why, when no poll worked.
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._poll_until_stopped, daemon=True, name="traffic")

    def start(self) -> None:
        found = self._poll()
        with self._lock:
            self._before = {connection.cookie: connection for connection in found or () if _closing(connection)}
        self._thread.start()

    def stop(self) -> Traffic:
        """Polls once more, after the thread's last poll, and returns the totals."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2 * connections.TIMEOUT + self._interval)
        self._poll()
        return self.totals()

    def totals(self) -> Traffic:
        """The sums over every socket seen, less what each had counted at the first poll."""
        with self._lock:
            if not self._polls:
                return Traffic(self._ports, unavailable=self._failure or "never polled")
            moved = {}
            for cookie, (sent, received) in self._largest.items():
                before = self._before.get(cookie)
                if before is not None:
                    sent, received = sent - before.sent, received - before.received
                if before is None or sent or received:
                    moved[cookie] = (sent, received)
            return Traffic(
                self._ports,
                sent=sum(sent for sent, _ in moved.values()),
                received=sum(received for _, received in moved.values()),
                connections=len(moved),
                polls=self._polls,
            )

    def _poll_until_stopped(self) -> None:
        while not self._stopped.wait(self._interval):
            self._poll()

    def _poll(self) -> list[Connection] | None:
        """One reading of the counters, kept; None (and why, the first time) when it failed."""
        try:
            found = self._read(self._ports)
        except Exception as error:  # Whatever it is, a count must never end the launcher's run.
            why = f"cannot read the sockets' counters from sock_diag: {type(error).__name__}: {error}"
            with self._lock:
                self._failure = self._failure or why
            return None
        with self._lock:
            for connection in found:
                sent, received = self._largest.get(connection.cookie, (0, 0))
                self._largest[connection.cookie] = (max(sent, connection.sent), max(received, connection.received))
            self._polls += 1
        return found


def _closing(connection: Connection) -> bool:
    """Whether a connection is being closed: every socket of a program that has ended is."""
    return connection.state not in (connections.ESTABLISHED, connections.SYN_SENT)


@contextlib.contextmanager
def counted(ports: Sequence[int], recorder: Log | None) -> Iterator[TrafficPoller]:
    """Polls while the block runs, then prints the record as every launcher line goes (trainer.contract.console)."""
    poller = TrafficPoller(ports)
    poller.start()
    try:
        yield poller
    finally:
        show(poller.stop().event() + "\n", recorder)

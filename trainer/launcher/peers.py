"""Watches each peer's rendezvous endpoint from a thread of its own.

One thread per peer, so that a slow answer (a frozen peer, or a name lookup for a peer that does
not exist, which takes the resolver's full timeout) never delays what is learned about the others.
"""

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path

from trainer.contract.cluster import Cluster, host_of
from trainer.contract.resultsdir import WorkerFiles, recorded_exit_code
from trainer.launcher import rendezvous

# How long one question to a peer may take before it counts as unanswered.
HEARTBEAT_TIMEOUT = 2.0
# How often the launcher's phases look at what the watches have learned (asking is the watches' own pace).
CHECK_INTERVAL = 0.05


@dataclasses.dataclass(frozen=True)
class Observation:
    """The latest answer of a peer, or why it did not answer, and how many times in a row.

    Unanswered, it keeps the fingerprint and state of the last answer: what the peer last said.
    """

    fingerprint: rendezvous.Fingerprint | None
    state: str | None
    unavailable: str | None
    misses: int
    health: dict = dataclasses.field(default_factory=dict)  # trainer/launcher/health.py's record.

    @property
    def answered(self) -> bool:
        return self.unavailable is None


class PeerWatch:
    def __init__(self, *, position: int, address: str, port: int, me: int, timeout: float, interval: float):
        self.position = position
        self.address = address
        self.interval = interval  # While meeting peers; the watchdog slows it to a heartbeat later.
        self.port = port
        self._me = me
        self._timeout = timeout
        self._latest: Observation | None = None
        self._stopped = threading.Event()
        # Set to cut the wait before the next question short (a stop, or a new interval).
        self._nudged = threading.Event()
        threading.Thread(target=self._poll, daemon=True, name=f"watch {address}").start()

    @property
    def latest(self) -> Observation | None:
        return self._latest

    def stop(self) -> None:
        self._stopped.set()
        self._nudged.set()

    def ask_every(self, interval: float) -> None:
        """From now on asks every `interval` seconds, starting at once: a wait under the old
        interval (a heartbeat's second) would otherwise delay the first answer that matters."""
        self.interval = interval
        self._nudged.set()

    def _poll(self) -> None:
        misses = 0
        while not self._stopped.is_set():
            started = time.monotonic()
            try:
                fingerprint, state, health = rendezvous.fetch(
                    host_of(self.address), self.port, me=self._me, timeout=self._timeout
                )
                misses = 0
                self._latest = Observation(fingerprint, state, None, 0, health)
                if state.startswith("exited"):
                    # How a peer ended is its last news: asking on would only find it gone, and
                    # must not hide that it ended well from a phase that has not looked yet.
                    return
            except rendezvous.PeerUnavailable as unavailable:
                misses += 1
                previous = self._latest
                self._latest = Observation(
                    previous.fingerprint if previous else None,
                    previous.state if previous else None,
                    str(unavailable),
                    misses,
                    previous.health if previous else {},
                )
            self._nudged.wait(max(0.0, self.interval - (time.monotonic() - started)))
            self._nudged.clear()


# The exit code a peer's launcher recorded (by the peer's address), when there is a record to read.
RecordedExit = Callable[[str], int | None]


def nothing_recorded(_address: str) -> int | None:
    """Without a results directory shared with the peers, no peer's exit is on record."""
    return None


def recorded_exits(results_dir: str | None, *, own_host: str, since: float) -> RecordedExit:
    """How peers' exits are read from a results directory shared with them (compose.yaml's /results).

    `since` is when this launcher started (wall-clock): a status written before it is an earlier
    run's. Workers that share this worker's host share its status file too, so theirs is unknown.
    """
    if not results_dir:
        return nothing_recorded

    def recorded_exit(address: str) -> int | None:
        host = host_of(address)
        if host == own_host:
            return None
        return recorded_exit_code(WorkerFiles(Path(results_dir), host), written_since=since)

    return recorded_exit


def watch_peers(cluster: Cluster, base_port: int, *, interval: float) -> list[PeerWatch]:
    """A watch on every worker of the cluster but this one, each asking every `interval` seconds."""
    return [
        PeerWatch(
            position=position,
            address=address,
            port=rendezvous.rendezvous_port(cluster, position, base_port),
            me=cluster.index,
            timeout=HEARTBEAT_TIMEOUT,
            interval=interval,
        )
        for position, address in enumerate(cluster.workers)
        if position != cluster.index
    ]

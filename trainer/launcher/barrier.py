"""Phase 1, the rendezvous barrier: every worker meets every peer before any of them trains.

A two-phase barrier: check every peer's fingerprint, then wait until every peer has too. Without
the second phase a worker could start TensorFlow while a peer still waits on a third worker that
never comes, and hang in TensorFlow's join instead of failing here. It is bounded by the join
deadline, and says at least every 10 s whom it still waits for, and why.
"""

import time
from collections.abc import Callable

from trainer.launcher import rendezvous
from trainer.launcher.failures import PeerNeverJoined, TopologyMismatch
from trainer.launcher.peers import CHECK_INTERVAL, Observation, PeerWatch
from trainer.launcher.stopping import StopRequest

PROGRESS_INTERVAL = 10.0


# How often each peer is asked while the workers meet: every poll delays the start of training
# by up to this long, but every worker asks every peer, so in larger clusters each peer is asked
# less often (up to 20 requests a second per worker, or every 0.2 s from 4 peers on).
def meeting_interval(peers: int) -> float:
    return min(0.2, 0.05 * max(1, peers))


class Barrier:
    def __init__(
        self,
        *,
        fingerprint: rendezvous.Fingerprint,
        watches: list[PeerWatch],
        server: rendezvous.Server,
        me: str,
        join_timeout: float,
        stop: StopRequest,
        say: Callable[[str], None],
    ):
        self._fingerprint = fingerprint
        self._watches = watches
        self._server = server  # Tells the peers how far this worker is: "waiting", then "agreed".
        self._me = me
        self._join_timeout = join_timeout
        self._stop = stop
        self._say = say
        self._validated: set[int] = set()  # Positions of the peers whose fingerprint matches.

    def meet(self, *, program_ended: Callable[[], bool]) -> None:
        """Returns once every peer agrees, or early if a gated program ended (its exit says why).

        Raises TopologyMismatch or PeerNeverJoined, and Stopped on a signal.
        """
        started = time.monotonic()
        deadline = started + self._join_timeout
        next_progress = started + PROGRESS_INTERVAL
        if self._watches:
            self._say(f"waiting for {len(self._watches)} peer(s), up to {self._join_timeout:.0f}s")
        while waiting := self._still_waiting():
            now = time.monotonic()
            if now >= deadline:
                raise PeerNeverJoined(
                    f"peer(s) never joined within the {self._join_timeout:.0f}s join deadline: {', '.join(waiting)}"
                )
            if now >= next_progress:
                self._say(f"waiting for {', '.join(waiting)} {now - started:.0f}s/{self._join_timeout:.0f}s")
                next_progress += PROGRESS_INTERVAL
            if program_ended():
                return
            self._stop.pause(min(CHECK_INTERVAL, max(0.0, deadline - now)))
        self._server.set_state("agreed")
        if self._watches:
            elapsed = time.monotonic() - started
            workers = len(self._watches) + 1  # Every peer, and this worker.
            leader = self._fingerprint.workers[0].rsplit(":", 1)[0]
            chief = f"; {leader} is TF_CONFIG's chief" if self._fingerprint.settings.get("TF_CHIEF") else ""
            self._say(f"all {workers} workers agree on the cluster and settings after {elapsed:.1f}s{chief}")

    def _still_waiting(self) -> list[str]:
        """The peers not yet past the first phase, each with why; raises if one disagrees or gave up."""
        waiting = []
        for watch in self._watches:
            seen = watch.latest
            self._validate(watch, seen)
            state = seen.state if seen else None
            if state and state.startswith("exited") and state != "exited 0":
                raise PeerNeverJoined(f"peer {watch.address} gave up before training ({state})")
            if state in (None, "waiting"):
                waiting.append(f"{watch.address} ({_why_waiting(seen)})")
        return waiting

    def _validate(self, watch: PeerWatch, seen: Observation | None) -> None:
        """The first phase: a peer's fingerprint must match this worker's; checked once per peer."""
        if seen is None or seen.fingerprint is None or watch.position in self._validated:
            return
        found = rendezvous.differences(
            self._fingerprint, seen.fingerprint, me=self._me, peer=watch.address, expected_index=watch.position
        )
        if found:
            raise TopologyMismatch("topology mismatch: " + "; ".join(found))
        self._validated.add(watch.position)
        if len(self._validated) == len(self._watches):
            # Peers that see this state know this worker is past the first phase: their second.
            self._server.set_state("agreed")


def _why_waiting(seen: Observation | None) -> str:
    if seen is None:
        return "no answer yet"
    if seen.answered:
        return "answering, still waiting for its own peers"
    return seen.unavailable

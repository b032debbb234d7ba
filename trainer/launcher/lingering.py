"""Phase 3's last step: an ending worker keeps serving its final state until its peers have seen it.

A peer that finds a worker gone without having seen how it ended cannot tell one that ended well
from one that was killed: it reports it lost, and stops its own training a grace period later. So
an ending launcher keeps serving its final state, and keeps asking its peers (more often now),
until every peer that may still ask has fetched that state or has ended itself.

The wait is bounded by LINGER, the longest a live peer takes to count a silent worker lost:
HEARTBEAT_MISSES questions, each up to HEARTBEAT_TIMEOUT, HEARTBEAT_INTERVAL apart (9 s). A peer
that gets no answer through in that time would count this worker lost even while it still served,
so a longer wait would help nobody. Such a peer may still read how this worker ended in its
recorded status (trainer/launcher/watchdog.py).
"""

import time

from trainer.launcher.peers import CHECK_INTERVAL, HEARTBEAT_TIMEOUT, PeerWatch
from trainer.launcher.rendezvous import Server
from trainer.launcher.stopping import StopRequest
from trainer.launcher.watchdog import HEARTBEAT_INTERVAL, HEARTBEAT_MISSES

LINGER = HEARTBEAT_MISSES * (HEARTBEAT_TIMEOUT + HEARTBEAT_INTERVAL)
# How often each peer is asked meanwhile: an ended peer seen sooner is waited for no longer.
POLL_INTERVAL = 0.2


def linger(*, server: Server, watches: list[PeerWatch], stop: StopRequest, timeout: float | None = None) -> None:
    """Returns once every peer that may still ask has seen this worker's final state, or has ended.

    At most `timeout` (LINGER unless given) later, and at once on a signal: whoever sent it waits
    for this process, not for its peers.
    """
    deadline = time.monotonic() + (LINGER if timeout is None else timeout)
    for watch in watches:
        watch.ask_every(POLL_INTERVAL)
    while not stop.requested:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        # Asked anew each time round: a peer that ends meanwhile is waited for no longer.
        if server.wait_until_seen(still_asking(watches), min(remaining, CHECK_INTERVAL)):
            return


def still_asking(watches: list[PeerWatch]) -> set[int]:
    """The positions of the peers that may still ask for this worker's state: met, not lost, not ended."""
    asking = set()
    for watch in watches:
        seen = watch.latest
        if seen is None or seen.state is None:
            continue  # Never answered: it has not met this worker, and learns nothing from its end.
        if seen.misses >= HEARTBEAT_MISSES or seen.state.startswith("exited"):
            continue  # Lost, or ended: it asks no more.
        asking.add(watch.position)
    return asking


def linger_then_close(*, server: Server, watches: list[PeerWatch], stop: StopRequest) -> None:
    """Serves the final state until every live peer has seen it (`linger`), then stops serving and asking."""
    linger(server=server, watches=watches, stop=stop)
    for watch in watches:
        watch.stop()
    server.close()

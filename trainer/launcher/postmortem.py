"""After the training program ended on its own: the launcher's exit code for it, and why.

The program's own verdict stands when it gave one (a config error, a failed training check). A
failure without one is often a peer's doing: TensorFlow fails at once when a peer goes, often
before a heartbeat has noticed. So every peer not seen ending well is asked, right then, whether
it is gone or failed; if any is, the worker ends as having lost it. A peer that is gone but
recorded a successful exit (trainer/launcher/watchdog.py, `recorded_exit`) ended well: no loss.
"""

from trainer.contract.cluster import host_of
from trainer.contract.exitcodes import ExitCode
from trainer.launcher import rendezvous
from trainer.launcher.failures import PeerLost, listing
from trainer.launcher.health import gone_peer, peer_trouble
from trainer.launcher.peers import PeerWatch, RecordedExit, nothing_recorded


def judge(
    exit_code: int,
    *,
    lost: dict[str, str],
    watches: list[PeerWatch],
    finished: set[int],
    me: int,
    recorded_exit: RecordedExit = nothing_recorded,
) -> int:
    """The launcher's exit code for the program's `exit_code`; PeerLost if lost peers explain a failure.

    `lost` are the peers the watchdog found lost, `finished` the positions of those it saw end well.
    """
    if exit_code in (ExitCode.CONFIG_ERROR, ExitCode.TRAINING_CHECK_FAILED):
        return exit_code  # The program's own verdict on itself, whatever its peers did since.
    if exit_code == 0:
        return ExitCode.OK
    lost = lost or probe_peers(watches, finished=finished, me=me, recorded_exit=recorded_exit)
    if lost:
        raise PeerLost(f"training program exited {_describe(exit_code)} after losing peer(s): {listing(lost)}")
    return 128 - exit_code if exit_code < 0 else exit_code  # As a shell reports a process a signal ended.


def probe_peers(
    watches: list[PeerWatch], *, finished: set[int], me: int, recorded_exit: RecordedExit = nothing_recorded
) -> dict[str, str]:
    """Asks every peer, one after another, whether it is gone or failed: address, and why."""
    lost = {}
    for watch in watches:
        # A peer seen ending well is not lost, even if it is gone before this question.
        if watch.position in finished or (watch.latest and watch.latest.state == "exited 0"):
            continue
        try:
            _, state, health = rendezvous.fetch(host_of(watch.address), watch.port, me=me, timeout=1.0)
        except rendezvous.PeerUnavailable as unavailable:
            seen = watch.latest
            # Gone after ending well (its recorded status) is no loss either.
            reason = gone_peer(
                recorded_exit(watch.address),
                str(unavailable),
                state=seen.state if seen else None,
                health=seen.health if seen else {},
            )
            if reason is not None:
                lost[watch.address] = reason
            continue
        if state.startswith("exited") and state != "exited 0":
            lost[watch.address] = peer_trouble(state, health)
    return lost


def _describe(exit_code: int) -> str:
    return f"on signal {-exit_code}" if exit_code < 0 else str(exit_code)

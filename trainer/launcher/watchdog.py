"""Phase 2's guard: while the program trains, enforce the run deadline and watch every peer.

A peer that stops answering, or reports a failed exit, is lost; the program then gets a grace
period to end on its own (TensorFlow usually fails at once), and is stopped after it. A peer that
reports a successful exit has finished, and its going away later is no loss.

A peer may also end well and be gone before a heartbeat saw it end: its launcher waits a while
for its peers to look (trainer/launcher/lingering.py), but one busy training may not. So before a
silent peer counts as lost, the exit its launcher recorded is asked for (`recorded_exit`: its
status in a results directory shared with this worker, when there is one); exit 0 there means
finished, as if a heartbeat had seen it.
"""

import math
import threading
import time
from collections.abc import Callable

from trainer.contract.exitcodes import ExitCode
from trainer.launcher import cgroup
from trainer.launcher.failures import DeadlineExceeded, LaunchFailure, OutOfMemory, PeerLost, Stall, listing
from trainer.launcher.health import Health, gone_peer, peer_trouble
from trainer.launcher.peers import CHECK_INTERVAL, Observation, PeerWatch, RecordedExit, nothing_recorded

# How often each peer is asked while training runs, once the workers have met.
HEARTBEAT_INTERVAL = 1.0
# Missed heartbeats in a row before a peer counts as lost: one slow answer is not a failure.
HEARTBEAT_MISSES = 3
# After a peer is lost, how long the program may take to end on its own before it is stopped.
LOST_PEER_GRACE = 10.0
FAILED_PEER_GRACE = 5.0
# A worker that loses its peers within this long of reaching its memory limit ran out of memory:
# thrashing (the kernel evicting its libraries' pages) slowed it until it could not answer.
MEMORY_BLAME_WINDOW = 30.0
# How long a worker may thrash at its memory limit before it is stopped as out of memory: as long
# as a lost peer is given to end (a thrashing worker trains too slowly to be worth waiting for).
THRASHING_LIMIT = LOST_PEER_GRACE


class Watchdog:
    """Runs on a thread of its own from `start()` until it stops the program or is told to `stop()`.

    Once `join()` returns, what it learned is final: `lost` (address: why), `finished` (positions
    of the peers that ended well) and `failure`, the reason it stopped the program if it did.
    """

    def __init__(
        self,
        *,
        watches: list[PeerWatch],
        run_timeout: float,
        stop_program: Callable[[], None],
        say: Callable[[str], None],
        recorded_exit: RecordedExit = nothing_recorded,
        health: Health | None = None,
        stall_timeout: float = math.inf,
        dump_stacks: Callable[[], None] = lambda: None,
    ):
        self._watches = watches
        self._health = health or Health(read_memory=_no_memory)
        self._stall_timeout = stall_timeout
        self._dump_stacks = dump_stacks
        self._stalled_peer: str | None = None  # A peer that declared a stall, which this worker joins.
        self._recorded_exit = recorded_exit
        self._run_timeout = run_timeout
        self._stop_program = stop_program
        self._say = say
        self.lost: dict[str, str] = {}
        self.finished: set[int] = set()
        self.failure: LaunchFailure | None = None
        self._run_deadline = math.inf  # Set when it starts, as the program does.
        self._stop_at = math.inf  # When the program is stopped for a lost peer, once one is lost.
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="watchdog")

    def start(self) -> None:
        """Starts the run deadline's clock, and slows the peers' watches to a heartbeat."""
        for watch in self._watches:
            watch.interval = HEARTBEAT_INTERVAL
        self._run_deadline = time.monotonic() + self._run_timeout
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def join(self) -> None:
        if self._thread.ident is not None:  # Never started: nothing to wait for.
            self._thread.join()

    def _watch(self) -> None:
        while not self._stopped.wait(CHECK_INTERVAL):
            now = time.monotonic()
            if self._health.due(now):
                self._health.sample(now)
            failure = self._failure(now)
            if failure is not None:
                self.failure = failure
                if isinstance(failure, Stall):
                    self._say(f"{failure.message}: its program's stack follows")
                    self._dump_stacks()  # While the program still waits where it stalled.
                self._stop_program()
                return

    def _failure(self, now: float) -> LaunchFailure | None:
        """Why the program must be stopped now, if it must."""
        if now >= self._run_deadline:
            return DeadlineExceeded(f"still running at the {self._run_timeout:.0f}s run deadline: stopped")
        for watch in self._watches:
            self._look_at(watch, now)
        stall = self._stall()
        if stall is not None:
            return stall
        if self._health.thrashing_for(now) >= THRASHING_LIMIT:
            return OutOfMemory(
                f"out of memory: thrashing at {self._health.memory.describe()}, reading back "
                f"{self._health.fault_rate:.0f} evicted pages a second for {THRASHING_LIMIT:.0f}s: stopped"
            )
        if now >= self._stop_at:
            if self._health.pressed_within(MEMORY_BLAME_WINDOW, now):
                return OutOfMemory(
                    f"out of memory: at {self._health.memory.describe()} the program thrashed "
                    f"until the worker lost its peer(s) {listing(self.lost)}"
                )
            return PeerLost(f"stopped: lost peer(s) {listing(self.lost)}")
        return None

    def _stall(self) -> Stall | None:
        """A stall, when no live worker's program (this one's included) has made progress for the stall timeout."""
        timeout = self._stall_timeout
        if self._stalled_peer is not None:
            self._health.stalled = True
            return Stall(f"stalled: {self._stalled_peer} found no worker making progress for {timeout:.0f}s")
        if self._health.idle < timeout:
            return None
        idle = {"this worker": self._health.idle}
        for watch in self._watches:
            if watch.address in self.lost or watch.position in self.finished:
                continue
            seen = watch.latest.health.get("idle_seconds") if watch.latest else None
            if not isinstance(seen, (int, float)) or seen < timeout:
                return None
            idle[watch.address] = seen
        self._health.stalled = True  # Served to the peers, which stop with this worker.
        shown = ", ".join(f"{who} {seconds:.0f}s" for who, seconds in idle.items())
        return Stall(f"stalled: no worker's program made progress for {timeout:.0f}s (idle: {shown})")

    def _look_at(self, watch: PeerWatch, now: float) -> None:
        if watch.address in self.lost or watch.position in self.finished:
            return
        seen = watch.latest
        if seen is None:
            return
        if seen.health.get("stalled") or seen.state == f"exited {ExitCode.STALLED}":
            self._stalled_peer = self._stalled_peer or watch.address
            return
        # The state is the peer's last answer, even once it no longer answers: how it ended is final.
        if seen.state == "exited 0":
            self.finished.add(watch.position)
            watch.stop()  # It is about to vanish, and that is no loss.
        elif seen.state and seen.state.startswith("exited"):
            # A failed peer is gone for good, so the grace is shorter; not zero, because this
            # worker may be past its last collective and finishing well.
            self._lose(watch.address, peer_trouble(seen.state, seen.health))
            self._stop_at = min(self._stop_at, now + FAILED_PEER_GRACE)
        elif seen.misses >= HEARTBEAT_MISSES:
            self._gone(watch, seen, now)

    def _gone(self, watch: PeerWatch, seen: Observation, now: float) -> None:
        """A peer no longer answers: finished if it recorded a successful exit, else lost."""
        recorded = self._recorded_exit(watch.address)
        missed = f"{seen.unavailable} ({seen.misses} heartbeats missed)"
        reason = gone_peer(recorded, missed, state=seen.state, health=seen.health)
        if reason is None:
            self.finished.add(watch.position)
            watch.stop()
            self._say(f"peer {watch.address} is gone, having ended well (exit 0, as its recorded status says)")
            return
        self._lose(watch.address, reason)
        # A recorded failure is final, as a failed state is; silence may still be a slow answer.
        self._stop_at = min(self._stop_at, now + (FAILED_PEER_GRACE if recorded is not None else LOST_PEER_GRACE))

    def _lose(self, peer: str, reason: str) -> None:
        self.lost[peer] = reason
        self._say(f"lost peer {peer}: {reason}")


def _no_memory():
    """Where no health is watched (a test's stand-in): no counters, so nothing is ever blamed on memory."""
    return cgroup.Memory(limit=None, peak=None, limit_hits=None, oom_kills=None, major_faults=None)

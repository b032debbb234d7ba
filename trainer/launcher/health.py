"""This worker's health while its program trains: how long it has been idle, and how near its memory limit.

The launcher samples it about once a second (trainer/launcher/watchdog.py) and serves the latest
record with every heartbeat answer (trainer/launcher/rendezvous.py), so that a peer can tell a
worker that stalled or ran out of memory from one that merely vanished:

    {"idle_seconds": 12.0, "memory": {"limit": 262144000, "peak": 262144000, "pressed": true, "oom_kills": 1}}

`pressed` means usage reached the limit since the previous sample: the kernel had to reclaim
(without swap, it evicts the pages of TensorFlow's own libraries, which then thrash) or to kill.
"""

import dataclasses
import time
from collections.abc import Callable

from trainer.contract.exitcodes import ExitCode
from trainer.contract.usage import mebibytes
from trainer.launcher import cgroup
from trainer.launcher.activity import Activity
from trainer.launcher.failures import OutOfMemory

# How often the watchdog's loop samples: /proc and the cgroup are read once per sample.
SAMPLE_INTERVAL = 1.0
# Major page faults a second, at the memory limit, from which a worker thrashes: measured, a worker
# held at 250 MiB read back about 4,400 pages a second and did no training in minutes; a worker
# with room takes a few thousand in all while it imports TensorFlow, and none at its limit.
THRASHING_FAULTS = 500


@dataclasses.dataclass(frozen=True, kw_only=True)
class MemoryState:
    limit: int | None
    peak: int | None
    pressed: bool  # Usage reached the limit since the previous sample.
    oom_kills: int  # Processes the kernel killed for memory since the launcher started.

    def describe(self) -> str:
        """ "its 250 MiB limit (peak 250 MiB)": the figures a memory failure is named with."""
        peak = f" (peak {mebibytes(self.peak)})" if self.peak is not None else ""
        return f"its {mebibytes(self.limit)} memory limit{peak}" if self.limit else f"no memory limit{peak}"

    def to_record(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record) -> "MemoryState | None":
        if not isinstance(record, dict):
            return None
        try:
            return cls(
                limit=record.get("limit"),
                peak=record.get("peak"),
                pressed=bool(record.get("pressed")),
                oom_kills=int(record.get("oom_kills") or 0),
            )
        except (TypeError, ValueError):
            return None


class Health:
    """Samples the program's activity and the container's memory counters; the latest is `memory` and `idle`."""

    def __init__(self, *, read_memory: Callable[[], cgroup.Memory] = cgroup.memory):
        self._read_memory = read_memory
        first = read_memory()
        # Counters since the container started: only what changes from here on is this run's.
        self._oom_kills_before = first.oom_kills or 0
        self._hits_before = first.limit_hits
        self._faults_before = (first.major_faults, None)  # (count, when)
        self._thrashing_since: float | None = None
        self.fault_rate = 0.0  # Major page faults a second, over the last sample.
        self._activity: Activity | None = None
        self._sampled_at: float | None = None
        self.idle = 0.0
        self.stalled = False  # Set by the watchdog when it declares a stall, so that the peers join it.
        self._pressed_at: float | None = None
        self.memory = MemoryState(limit=first.limit, peak=first.peak, pressed=False, oom_kills=0)

    def watch(self, activity: Activity) -> None:
        """The program to judge idle or busy, once it has started."""
        self._activity = activity

    def due(self, now: float) -> bool:
        return self._sampled_at is None or now - self._sampled_at >= SAMPLE_INTERVAL

    def sample(self, now: float) -> None:
        self._sampled_at = now
        if self._activity is not None:
            self._activity.sample(now)
            self.idle = self._activity.idle_for(now)
        self._sample_memory(now)

    def _sample_memory(self, now: float) -> None:
        reading = self._read_memory()
        hits, kills = reading.limit_hits, max(0, (reading.oom_kills or 0) - self._oom_kills_before)
        hit_limit = hits is not None and self._hits_before is not None and hits > self._hits_before
        self._hits_before = hits
        self.memory = MemoryState(
            limit=reading.limit,
            peak=reading.peak,
            pressed=hit_limit or kills > self.memory.oom_kills,
            oom_kills=kills,
        )
        if self.memory.pressed:
            self._pressed_at = now
        self._count_faults(reading.major_faults, now)
        thrashing = self.memory.pressed and self.fault_rate >= THRASHING_FAULTS
        self._thrashing_since = (self._thrashing_since or now) if thrashing else None

    def _count_faults(self, faults: int | None, now: float) -> None:
        before, when = self._faults_before
        self._faults_before = (faults, now)
        if faults is not None and before is not None and when is not None and now > when:
            self.fault_rate = (faults - before) / (now - when)

    def thrashing_for(self, now: float) -> float:
        """How long the worker has been thrashing at its memory limit, without a break; 0 if it is not."""
        return 0.0 if self._thrashing_since is None else now - self._thrashing_since

    def pressed_within(self, seconds: float, now: float) -> bool:
        """Whether usage reached the memory limit in the last `seconds`."""
        return self._pressed_at is not None and now - self._pressed_at <= seconds

    def check_killed(self, exit_code: int) -> None:
        """Raises OutOfMemory if the kernel killed a process of the program that ended with `exit_code`."""
        self._sample_memory(time.monotonic())  # The kill counter, read after the program ended.
        if exit_code != 0 and self.memory.oom_kills:
            ended = f"signal {-exit_code}" if exit_code < 0 else f"exit {exit_code}"
            raise OutOfMemory(
                f"out of memory: the kernel killed the training program ({ended}) at {self.memory.describe()}"
            )

    def to_record(self) -> dict:
        return {"idle_seconds": round(self.idle, 1), "stalled": self.stalled, "memory": self.memory.to_record()}


def peer_trouble(state: str, health: dict, *, unavailable: str | None = None) -> str:
    """How a lost peer is named: its last state or why it no longer answers, and its memory if that explains it.

    `state` is the peer's last ("exited 9", say); `unavailable` why it stopped answering, if it did.
    """
    memory = MemoryState.from_record(health.get("memory"))
    if unavailable is None and state == f"exited {ExitCode.OUT_OF_MEMORY}":
        return f"{state}: out of memory at {memory.describe()}" if memory else f"{state}: out of memory"
    if unavailable is None and state == f"exited {ExitCode.STALLED}":
        return f"{state}: stalled"
    said = state if unavailable is None else unavailable
    if memory is not None and memory.pressed:
        return f"{said}; its last heartbeat said it was at {memory.describe()}: out of memory"
    return said


def gone_peer(recorded: int | None, unavailable: str, *, state: str | None, health: dict) -> str | None:
    """Why a peer that no longer answers counts as lost; None when its recorded status says it ended well.

    `recorded` is the exit its launcher recorded (trainer/launcher/peers.py, `recorded_exits`), if
    any; `state` and `health` are from its last answer.
    """
    if recorded == 0:
        return None
    if recorded is not None:
        return f"exited {recorded} (its recorded status)"
    return peer_trouble(state or "", health, unavailable=unavailable)

"""The container's own limits and counters, as its cgroup keeps them (v1 or v2), read without privileges.

The kernel charges every process of the container to one cgroup, and Docker mounts that cgroup
read-only at /sys/fs/cgroup inside it (with `cap_drop: ALL` too). Two layouts exist:

- v2 (unified): `memory.max` ("max" when unlimited), `memory.peak` (Linux 5.19 and later),
  `memory.events` (`max`: times usage hit the limit, `oom_kill`: processes killed), `memory.stat`
  (`pgmajfault`: page faults that read from disk), `cpu.max` ("QUOTA PERIOD", QUOTA "max" when
  unlimited);
- v1: `memory/memory.limit_in_bytes` (a huge number when unlimited), `memory.max_usage_in_bytes`,
  `memory.failcnt` (times usage hit the limit), `memory.oom_control` (`oom_kill`: processes
  killed), `memory.stat` (`total_pgmajfault`), and `cpu/cpu.cfs_quota_us` (-1 when unlimited)
  with `cpu.cfs_period_us`.

A counter that cannot be read is None: outside a container, or on a kernel without it, the
launcher still runs, it only cannot say as much.
"""

import dataclasses
import os
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
# v1 reports "no limit" as the largest page-aligned 63-bit number; anything past this is none.
_UNLIMITED = 2**62


@dataclasses.dataclass(frozen=True, kw_only=True)
class Memory:
    """One reading of the container's memory counters, in bytes; None where the kernel keeps none."""

    limit: int | None  # None: no limit.
    peak: int | None
    # How many times usage reached the limit (each time the kernel had to reclaim or fail).
    limit_hits: int | None
    oom_kills: int | None
    # Page faults that had to read from disk, counted since the container started: at the limit,
    # evicted pages of code and libraries read back again and again (thrashing) show here.
    major_faults: int | None


def memory(root: Path = ROOT) -> Memory:
    if (root / "cgroup.controllers").exists():
        events = _keyed(root / "memory.events")
        return Memory(
            limit=_limit(_text(root / "memory.max")),
            peak=_number(root / "memory.peak"),
            limit_hits=events.get("max"),
            oom_kills=events.get("oom_kill"),
            major_faults=_keyed(root / "memory.stat").get("pgmajfault"),
        )
    v1 = root / "memory"
    return Memory(
        limit=_limit(_text(v1 / "memory.limit_in_bytes")),
        peak=_number(v1 / "memory.max_usage_in_bytes"),
        limit_hits=_number(v1 / "memory.failcnt"),
        oom_kills=_keyed(v1 / "memory.oom_control").get("oom_kill"),
        # The hierarchical total includes any child cgroup's.
        major_faults=_keyed(v1 / "memory.stat").get("total_pgmajfault"),
    )


def cpu_limit(root: Path = ROOT) -> float:
    """The cores the container may use: its CPU quota (Compose's `cpus:`), at most the cores it may run on."""
    cores = float(len(os.sched_getaffinity(0)))
    if (root / "cgroup.controllers").exists():
        fields = (_text(root / "cpu.max") or "").split()
        quota, period = (fields + ["", ""])[:2]
    else:
        directory = root / "cpu" if (root / "cpu").is_dir() else root / "cpu,cpuacct"
        quota, period = _text(directory / "cpu.cfs_quota_us"), _text(directory / "cpu.cfs_period_us")
    try:
        share = int(quota) / int(period)
    except (TypeError, ValueError, ZeroDivisionError):  # "max", -1's absence, or nothing to read.
        return cores
    return min(share, cores) if share > 0 else cores


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _number(path: Path) -> int | None:
    text = _text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _limit(text: str | None) -> int | None:
    if text is None or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value < _UNLIMITED else None


def _keyed(path: Path) -> dict[str, int]:
    """A flat-keyed file ("name value" per line), such as memory.events or memory.oom_control."""
    found = {}
    for line in (_text(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            found[name] = int(value)
    return found

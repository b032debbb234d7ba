"""What a worker's training program used: its launcher records it in the status, the verifier compares them.

`{"usage": {"wall_seconds": W, "cpu_seconds": C, "cpu_limit": L, "peak_memory": B}}`: the program's
wall time, the CPU time its processes used, the cores its container may use, and the largest
resident size of any one of its processes. The busy share, C / (W * L), is the part of what it
could have computed that it did compute (trainer/verifier/stragglers.py).
"""

import dataclasses
import math


@dataclasses.dataclass(frozen=True, kw_only=True)
class Usage:
    wall_seconds: float
    cpu_seconds: float
    cpu_limit: float
    peak_memory: int

    def line(self) -> str:
        """The launcher's last line about the program: what the containers' limits are sized by (compose.yaml)."""
        return (
            f"training program used {self.wall_seconds:.1f}s, {self.cpu_seconds:.1f} CPU-seconds "
            f"(busy {self.busy_share():.0%} of {self.cpu_limit:g} CPUs), peak memory {mebibytes(self.peak_memory)}"
        )

    def busy_share(self) -> float:
        return self.cpu_seconds / (self.wall_seconds * self.cpu_limit) if self.wall_seconds and self.cpu_limit else 0.0

    def to_record(self) -> dict:
        return {
            "wall_seconds": round(self.wall_seconds, 3),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "cpu_limit": self.cpu_limit,
            "peak_memory": self.peak_memory,
        }

    @classmethod
    def from_record(cls, record) -> "Usage | None":
        """The usage a status records; None unless its wall time, CPU time and CPU limit are numbers that make sense."""
        if not isinstance(record, dict):
            return None
        figures = [record.get(key) for key in ("wall_seconds", "cpu_seconds", "cpu_limit")]
        if not all(_number(figure) for figure in figures):
            return None
        wall, cpu, limit = figures
        if wall <= 0 or limit <= 0 or cpu < 0:
            return None
        peak = record.get("peak_memory")
        return cls(wall_seconds=wall, cpu_seconds=cpu, cpu_limit=limit, peak_memory=peak if _number(peak) else 0)


def mebibytes(count: int | None) -> str:
    return "?" if count is None else f"{count / 2**20:.0f} MiB"


def size_text(count: int) -> str:
    """A size as people write it: KiB below a MiB, MiB below a GiB, else GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count / 2**10:.3g} KiB"


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

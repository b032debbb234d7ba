"""Network faults timed by training progress: what `TF_NETWORK_FAULTS` (scripts/run --fault) says.

One fault a clause, clauses separated by `;`:

    cut WORKER [in | out] at step N | at epoch N | at Ts  for Ds

`cut worker-2 at epoch 2 for 20s` cuts worker-2 off, both ways, when its training begins its
second epoch, and heals it 20 s later; `in` or `out` cuts one way only (what arrives at the
worker, or what leaves it). `at step N`: once the worker has taken N training steps; `at Ts`: T
seconds after its first step. The worker's shaper (trainer/shaper/schedule.py) applies each of its
own worker's faults when the worker's progress (trainer/observer/progress.py) reaches it, and
records what it did for the verifier. Read by scripts/run (checked before anything starts) and
by the shaper, so both say the same of a bad clause.
"""

import dataclasses
import re

VARIABLE = "TF_NETWORK_FAULTS"
GRAMMAR = "cut WORKER [in | out] at step N | at epoch N | at Ts for Ds"
TRIGGERS = ("step", "epoch", "seconds")

_CLAUSE = re.compile(
    r"cut\s+(?P<worker>worker-\d+)(?:\s+(?P<way>in|out))?"
    r"\s+at\s+(?:step\s+(?P<step>\d+)|epoch\s+(?P<epoch>\d+)|(?P<seconds>\d+(?:\.\d+)?)\s*s)"
    r"\s+for\s+(?P<duration>\d+(?:\.\d+)?)\s*s"
)


@dataclasses.dataclass(frozen=True)
class Fault:
    worker: str
    way: str  # `both`, `in` or `out` (trainer/shaper/rules.py's DIRECTIONS).
    trigger: str  # One of TRIGGERS.
    at: float  # The step, the epoch, or the seconds after the first step.
    seconds: float  # How long the cut lasts.

    def when(self) -> str:
        if self.trigger == "seconds":
            return f"{self.at:g}s after its first step"
        return f"{self.trigger} {self.at:g}"

    def describe(self) -> str:
        way = (
            "" if self.way == "both" else f" one way ({'what arrives at it' if self.way == 'in' else 'what leaves it'})"
        )
        return f"cut {self.worker} off{way} at {self.when()} for {self.seconds:g}s"


def parse(text: str, workers: list[str] | None = None) -> list[Fault]:
    """The faults `text` schedules, in order; raises ValueError naming the first bad clause (or a
    worker not among `workers`, where they are known)."""
    faults = []
    for clause in (part.strip() for part in text.split(";")):
        if not clause:
            continue
        found = _CLAUSE.fullmatch(clause)
        if not found:
            raise ValueError(f"`{VARIABLE}`: {clause!r} is not a fault ({GRAMMAR})")
        trigger = next(name for name in TRIGGERS if found[name] is not None)
        fault = Fault(
            worker=found["worker"],
            way=found["way"] or "both",
            trigger=trigger,
            at=float(found[trigger]),
            seconds=float(found["duration"]),
        )
        if fault.seconds <= 0 or (fault.trigger != "seconds" and fault.at < 1):
            raise ValueError(f"`{VARIABLE}`: {clause!r}: steps and epochs count from 1, a cut lasts more than 0s")
        if workers is not None and fault.worker not in workers:
            raise ValueError(f"`{VARIABLE}`: {clause!r}: no {fault.worker} in this cluster ({', '.join(workers)})")
        faults.append(fault)
    return faults


def record_path(results_dir: str, worker: str) -> str:
    """Where the worker's shaper records what it did of its faults: a JSON list, rewritten whole."""
    return f"{results_dir}/faults-{worker}.json"

"""Network faults timed by training progress: what `TF_NETWORK_FAULTS` (scripts/run --fault) says.

One fault a clause, clauses separated by `;`:

    cut WORKER [in | out]  at step N | at epoch N | at Ts  for Ds
    LINK: PROFILE          at step N | at epoch N | at Ts  for Ds

`cut worker-2 at epoch 2 for 20s` cuts worker-2 off, both ways, when its training begins its
second epoch, and heals it 20 s later; `in` or `out` cuts one way only (what arrives at the
worker, or what leaves it). `worker-0,worker-1 <-> worker-2,worker-3: thin at step 5 for 30s`
gives the links between two racks the profile `thin` from the fifth step for 30 s, then their own
again (LINK: PROFILE is a clause of scripts/run --link, trainer/contract/links.py). `at step N`:
once the worker has taken N training steps; `at Ts`: T seconds after its first step. Each shaper
(trainer/shaper/schedule.py) applies the faults of its worker (a cut of it, a link it is an end
of) when the worker's progress (trainer/observer/progress.py) reaches them, and records what it
did for the verifier. Read by scripts/run (checked before anything starts) and by the shaper, so
both say the same of a bad clause.

A shaper takes its worker's faults one after another, in the order given: one whose moment came
while an earlier one lasted is applied when that one is undone. So a link's fault whose ends have
different faults before it may be applied by its ends at different steps; the verdict then says
when the last end applied it (trainer/verifier/faults.py). After a restart (`--recover`) each
shaper goes on from the faults it had itself reached.
"""

import dataclasses
import re

from trainer.contract import links as linkclauses
from trainer.contract.shaping import PROFILE_NAMES

VARIABLE = "TF_NETWORK_FAULTS"
GRAMMAR = "cut WORKER [in | out] at step N | at epoch N | at Ts for Ds, or LINK: PROFILE at ... for Ds"
TRIGGERS = ("step", "epoch", "seconds")

_WHEN = (
    r"\s+at\s+(?:step\s+(?P<step>\d+)|epoch\s+(?P<epoch>\d+)|(?P<seconds>\d+(?:\.\d+)?)\s*s)"
    r"\s+for\s+(?P<duration>\d+(?:\.\d+)?)\s*s"
)
_CUT = re.compile(r"cut\s+(?P<worker>worker-\d+)(?:\s+(?P<way>in|out))?" + _WHEN)
_LINK = re.compile(r"(?P<link>[^:]+:\s*[\w+-]+)" + _WHEN)


@dataclasses.dataclass(frozen=True)
class Fault:
    worker: str  # The worker cut off; "" for a link's fault.
    way: str  # `both`, `in` or `out` (trainer/shaper/rules.py's DIRECTIONS).
    trigger: str  # One of TRIGGERS.
    at: float  # The step, the epoch, or the seconds after the first step.
    seconds: float  # How long the cut (or the link's other profile) lasts.
    link: str = ""  # A link's fault: its clause, `GROUP <-> GROUP: PROFILE` (trainer/contract/links.py).

    @property
    def kind(self) -> str:
        return "link" if self.link else "cut"

    def links(self) -> linkclauses.Links:
        """The link's fault as links that differ: the profile it gives each direction it names."""
        return linkclauses.parse(self.link, PROFILE_NAMES)

    def ends(self, workers: list[str]) -> list[str]:
        """The workers whose shapers apply it: the one cut off, or both ends of every direction named."""
        if not self.link:
            return [self.worker]
        named = self.links()
        return [
            worker
            for worker in workers
            if any(
                named.profile_of(worker, peer, "") or named.profile_of(peer, worker, "")
                for peer in workers
                if peer != worker
            )
        ]

    def when(self) -> str:
        if self.trigger == "seconds":
            return f"{self.at:g}s after its first step"
        return f"{self.trigger} {self.at:g}"

    def describe(self) -> str:
        if self.link:
            return f"{self.link} at {self.when()} for {self.seconds:g}s"
        way = (
            "" if self.way == "both" else f" one way ({'what arrives at it' if self.way == 'in' else 'what leaves it'})"
        )
        return f"cut {self.worker} off{way} at {self.when()} for {self.seconds:g}s"


@dataclasses.dataclass(frozen=True)
class Words:
    """What the shaper and the verdict say of a fault of one kind: injected, never reached, in force
    at the worker's end, undone, and the fault itself."""

    injected: str
    not_injected: str
    in_force: str
    undone: str
    itself: str


WORDS = {
    "cut": Words("cut", "not cut", "cut off", "healed", "the cut"),
    "link": Words("applied", "not applied", "changed", "restored", "the change"),
}


def parse(text: str, workers: list[str] | None = None) -> list[Fault]:
    """The faults `text` schedules, in order; raises ValueError naming the first bad clause (or a
    worker not among `workers`, where they are known)."""
    faults = []
    for clause in (part.strip() for part in text.split(";")):
        if not clause:
            continue
        found = _CUT.fullmatch(clause) or _LINK.fullmatch(clause)
        if not found:
            raise ValueError(f"`{VARIABLE}`: {clause!r} is not a fault ({GRAMMAR})")
        trigger = next(name for name in TRIGGERS if found[name] is not None)
        link = found.groupdict().get("link") or ""
        fault = Fault(
            worker=found.groupdict().get("worker") or "",
            way=found.groupdict().get("way") or "both",
            trigger=trigger,
            at=float(found[trigger]),
            seconds=float(found["duration"]),
            link=_spaced(link),
        )
        if fault.seconds <= 0 or (fault.trigger != "seconds" and fault.at < 1):
            raise ValueError(f"`{VARIABLE}`: {clause!r}: steps and epochs count from 1, a fault lasts more than 0s")
        if link:
            try:
                linkclauses.parse(fault.link, PROFILE_NAMES, workers)
            except ValueError as error:
                # The link's own reason, under this clause rather than the link's.
                reason = str(error).removeprefix(f"`{linkclauses.VARIABLE}`: ").removeprefix(f"{fault.link!r}: ")
                raise ValueError(f"`{VARIABLE}`: {clause!r}: {reason}") from None
        elif workers is not None and fault.worker not in workers:
            raise ValueError(f"`{VARIABLE}`: {clause!r}: no {fault.worker} in this cluster ({', '.join(workers)})")
        if any(earlier.describe() == fault.describe() for earlier in faults):
            # The records know a fault by what it says (trainer/verifier/faults.py): one a clause.
            raise ValueError(f"`{VARIABLE}`: {clause!r}: given twice")
        faults.append(fault)
    return faults


def _spaced(link: str) -> str:
    """`worker-0,worker-1 <-> worker-2: thin`, however it was spaced: one way of saying each link."""
    link = re.sub(r"\s*(<->|->)\s*", r" \1 ", link.strip())
    return re.sub(r"\s*:\s*", ": ", re.sub(r"\s*,\s*", ",", link))


def record_path(results_dir: str, worker: str) -> str:
    """Where the worker's shaper records what it did of its faults: a JSON list, rewritten whole."""
    return f"{results_dir}/faults-{worker}.json"

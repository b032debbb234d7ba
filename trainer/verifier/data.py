"""Whether each worker trained on examples of its own: the keys of what each one's input delivered.

The observer keys every example a worker's distributed dataset delivered to its replicas, and
writes at the program's end, per use (`training`, `other`), their count and the smallest distinct
keys: all of them for a small data set, a bottom-k sketch past that (trainer/observer/data.py,
trainer/verifier/observed.py). Workers whose input is sharded read disjoint examples: any example
two workers both trained on was read twice by the cluster, and past `TOLERATED` of the smaller
worker's examples it is a FAIL that names the workers, the share and the likely cause. Below that
it is told, not failed: a data set may hold the same example twice.

Two complete key sets are compared exactly. Otherwise the share is estimated the bottom-k way:
among the smallest keys of the union that both sketches cover, the fraction both hold estimates
the workers' overlap (Broder's resemblance), and the line says it is an estimate.

A program that means every worker to read the same examples says so with
TF_DATA_SHARDING=replicated: the line then says what they shared, and fails nothing.

Where no worker's training steps took their examples from a distributed dataset (a generator fed
by hand, tensors built in the step), the line says `not observed` and claims nothing; records
older than the keys (a saved log) get no line at all.
"""

import dataclasses
import itertools

from trainer.verifier.observed import Session
from trainer.verifier.text import names

TOLERATED = 0.01  # A share of shared examples told but not failed: the same example twice in a data set.
_SPACE = float(1 << 64)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Data:
    problems: tuple[str, ...] = ()
    line: str | None = None  # For a passing run's proof, or `not observed`.
    observed: bool | None = None  # Whether a training step's input was seen; None: not judged (older records).
    workers: dict[str, dict] = dataclasses.field(default_factory=dict)  # Each one's `examples`, `distinct`, `exact`.

    def as_data(self) -> dict:
        """For the verdict's record (trainer/verifier/render.py)."""
        return {
            "proven": self.line,
            "problems": list(self.problems),
            "observed": self.observed,
            "workers": self.workers,
        }


@dataclasses.dataclass(frozen=True)
class Examples:
    """One worker's training examples, as its records give them."""

    examples: int  # Delivered, counting repeats.
    keys: frozenset[int]  # The smallest distinct keys (all of them when `complete`).
    distinct: int | None  # Exact, or None past what the observer counts.
    unit: str  # `example`, or `element` (keyed whole).
    batches: tuple[str, ...]  # The first batches' keys, in order.

    @property
    def complete(self) -> bool:
        return self.distinct is not None and self.distinct <= len(self.keys)

    @property
    def largest(self) -> float:
        """The largest key a sketch holds: the sketch covers the keys below it, all of them."""
        return float("inf") if self.complete else float(max(self.keys))

    def estimated(self) -> float:
        """Distinct examples: exact, or estimated from the sketch (k-1 over the k-th smallest's place)."""
        if self.distinct is not None:
            return float(self.distinct)
        return (len(self.keys) - 1) / (max(self.keys) / _SPACE)


def judge_data(observed: dict[str, list[Session]], expected_workers: int, *, replicated: bool = False) -> Data:
    """`replicated`: the program means every worker to read the same examples (TF_DATA_SHARDING=replicated):
    what they shared is said, and fails nothing."""
    if expected_workers < 2 or not observed:
        return Data()
    read = {name: _training(sessions) for name, sessions in sorted(observed.items())}
    if any(examples is None for examples in read.values()):
        return Data()  # Records older than the observer's keys of the data: nothing to judge.
    seen = {name: examples for name, examples in read.items() if examples.examples}
    if not seen:
        return Data(
            line="data: not observed: no training step took its examples from a dataset the strategy distributed "
            "(a generator or tensors fed to the step by hand): nothing is claimed about what each worker read",
            observed=False,
        )
    figures = {
        name: {"examples": examples.examples, "distinct": round(examples.estimated()), "exact": examples.complete}
        for name, examples in read.items()
    }
    unit = "elements" if any(examples.unit == "element" for examples in seen.values()) else "examples"
    missing = [name for name in read if name not in seen]
    if missing:
        problem = (
            f"{names(missing)} read no {unit} for training from the strategy's distributed dataset, "
            f"while {names(list(seen))} did"
        )
        return Data(problems=(problem,), observed=True, workers=figures)
    overlaps = [
        overlap
        for (first, a), (second, b) in itertools.combinations(seen.items(), 2)
        if (overlap := _overlap(first, a, second, b, unit))
    ]
    failed = tuple(overlap.line for overlap in overlaps if overlap.share > TOLERATED)
    if failed and replicated:
        said = "; ".join(line.split(": the input is", 1)[0] for line in failed)
        return Data(
            line=f"data: replicated, as TF_DATA_SHARDING=replicated allows: {said}", observed=True, workers=figures
        )
    if failed:
        return Data(problems=failed, observed=True, workers=figures)
    return Data(line=_proof(seen, overlaps, unit), observed=True, workers=figures)


@dataclasses.dataclass(frozen=True)
class _Overlap:
    shared: float
    share: float  # Of the smaller worker's distinct examples.
    line: str


def _overlap(first: str, a: Examples, second: str, b: Examples, unit: str) -> _Overlap | None:
    exact = a.complete and b.complete
    if exact:
        shared = float(len(a.keys & b.keys))
    else:
        covered = min(a.largest, b.largest)
        union = {key for key in a.keys | b.keys if key <= covered}
        both = {key for key in union if key in a.keys and key in b.keys}
        resemblance = len(both) / len(union) if union else 0.0
        shared = resemblance * (a.estimated() + b.estimated()) / (1 + resemblance)
    if shared <= 0:
        return None
    smaller = min(a.estimated(), b.estimated())
    share = min(shared / smaller, 1.0) if smaller else 0.0
    number = f"{shared:.0f}" if exact else f"about {float(f'{shared:.3g}'):.0f}"
    same_batches = sum(1 for x, y in zip(a.batches, b.batches, strict=False) if x == y)
    compared = min(len(a.batches), len(b.batches))
    if share > 1 - TOLERATED:
        said = f"{first} and {second} read the same {number} {unit} ({share:.0%})"
        if not exact:
            said = f"{first} and {second} read the same {unit}, {number} of them ({share:.0%})"
        cause = "the input is not sharded (dataset_fn without .shard, or AutoShardPolicy.OFF)"
    else:
        said = f"{first} and {second} both read {number} of their {unit} ({share:.0%})"
        cause = (
            "the input is sharded differently on each worker, or not at all "
            "(a shuffle seeded per worker before .shard, or no .shard)"
        )
    if same_batches:
        said += f", in identical batches at {same_batches} of {compared} steps"
    return _Overlap(shared, share, f"{said}: {cause}")


def _proof(seen: dict[str, Examples], overlaps: list[_Overlap], unit: str) -> str:
    estimates = [examples.estimated() for examples in seen.values()]
    exact = all(examples.complete for examples in seen.values())
    low, high = round(min(estimates)), round(max(estimates))
    each = f"{low} distinct each" if low == high else f"{low} to {high} distinct each"
    shared = sum(overlap.shared for overlap in overlaps)
    told = "none shared" if not overlaps else f"{shared:.0f} shared (under {TOLERATED:.0%}: the same example twice?)"
    total = f"{sum(estimates) - shared:.0f} in all"
    estimate = "" if exact else " (estimated from a sample of their keys)"
    return f"data: each worker read its own {unit}: {each}, {told}, {total}{estimate}"


def _training(sessions: list[Session]) -> Examples | None:
    """The worker's training examples over all its sessions (a restarted run's each), or None for
    records older than the observer's keys."""
    records = [record for session in sessions for record in session.data if record.get("use") == "training"]
    if not records:
        return None
    keys = frozenset(int(key, 16) for record in records for key in record.get("keys") or ())
    counts = [record.get("distinct") for record in records]
    complete = all(
        isinstance(record.get("distinct"), int) and record["distinct"] <= len(record.get("keys") or ())
        for record in records
    )
    return Examples(
        examples=sum(int(record.get("examples") or 0) for record in records),
        keys=keys,
        distinct=len(keys) if complete else (counts[0] if len(records) == 1 else None),
        unit="example" if all(record.get("unit") == "example" for record in records) else "element",
        batches=tuple(batch for record in records for batch in record.get("batches") or ()),
    )

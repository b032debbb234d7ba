"""Whether each worker trained on examples of its own: the keys of what each one's input delivered.

The observer keys every example a worker's distributed dataset delivered to its replicas, and
writes at the program's end, per use (`training`, `other`), their count and the smallest distinct
keys: all of them for a small data set, a bottom-k sketch past that (trainer/observer/data.py,
trainer/verifier/observed.py). Workers whose input is sharded read disjoint examples: any example
two workers both trained on was read twice by the cluster, and past `TOLERATED` of the smaller
worker's examples it is a FAIL that names the workers, the share and the likely cause. Below that
it is told, not failed: a data set may hold the same example twice.

A pipeline that repeats its data (`.repeat()`, or epochs reshuffled alike on every worker) brings
each example back, to whichever worker the step's place gives it: over a long run every worker
may read every example, and that is no overlap. So where the workers shared examples over a run
that read its data more than once, they are compared again within one pass over the data, which
decides: the first steps, while all the workers together had read no more examples than they read
distinct between them over the whole run (the observer keeps the step that first brought each
key), and the lines say so. That pass assumes the workers' shares are disjoint, so where they are
not it is too short to show what each epoch gave them alike: an overlap it finds is named over
each worker's own pass instead, the steps before any worker read an example of its own again (the
whole run, where none did).

Two complete key sets are compared exactly. Otherwise the share is estimated the bottom-k way:
among the smallest keys of the union that both sketches cover, the fraction both hold estimates
the workers' overlap (Broder's resemblance), and the line says it is an estimate.

A program that means every worker to read the same examples says so with
TF_DATA_SHARDING=replicated: the line then says what they shared, and fails nothing.

Where no worker's training steps took their examples from a distributed dataset (a generator fed
by hand, tensors built in the step), the line says `not observed` and claims nothing; records
older than the keys (a saved log) get no line at all.
"""

import collections
import dataclasses
import itertools
import math

from trainer.verifier.observed import Session
from trainer.verifier.text import names

TOLERATED = 0.01  # A share of shared examples told but not failed: the same example twice in a data set.
_SPACE = float(1 << 64)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Data:
    problems: tuple[str, ...] = ()
    line: str | None = None  # For a passing run's proof, or `not observed`.
    observed: bool | None = None  # Whether a training step's input was seen; None: not judged (older records).
    # Each one's `examples`, `distinct`, `exact`, and `one_pass` where the run read its data again.
    workers: dict[str, dict] = dataclasses.field(default_factory=dict)
    replicated: bool = False  # The workers shared examples, as TF_DATA_SHARDING=replicated allowed.

    def as_data(self) -> dict:
        """For the verdict's record (trainer/verifier/render.py)."""
        return {
            "proven": self.line,
            "problems": list(self.problems),
            "observed": self.observed,
            "replicated": self.replicated,
            "workers": self.workers,
        }


@dataclasses.dataclass(frozen=True)
class Examples:
    """One worker's training examples, as its records give them."""

    examples: int  # Delivered, counting repeats.
    keys: dict[int, int]  # The smallest distinct keys (all of them when `complete`), each its first delivery.
    complete: bool
    bound: float  # The largest key a sketch holds, which covers every key below it; infinite when complete.
    unit: str  # `example`, or `element` (keyed whole).
    batches: tuple[str, ...]  # The first batches' keys, in order.
    sizes: tuple[int, ...] | None  # The examples of each delivery, in order; None in older records.
    counted: int | None = None  # The observer's exact count of distinct examples, where it kept no sketch.
    epochs: tuple[int, ...] = ()  # The deliveries so far at each end of a Keras epoch.

    def estimated(self) -> float:
        """Distinct examples: exact, or estimated from the sketch (k-1 over the k-th smallest's place)."""
        if self.complete:
            return float(len(self.keys))
        if self.counted is not None:
            return float(self.counted)
        return sum(1 for key in self.keys if key < self.bound) / (self.bound / _SPACE)

    def fresh(self) -> int | None:
        """The steps before this worker first read an example it had read before (its own pass over
        what it reads), or None if it never did. From a sketch, a step counts as a repeat only when
        its reads pass the estimate of the examples new so far by a few of its standard errors."""
        sample = self.keys if self.complete else {key: first for key, first in self.keys.items() if key < self.bound}
        fraction = 1.0 if self.complete else self.bound / _SPACE
        new = collections.Counter(sample.values())
        read = sampled = 0
        for step, size in enumerate(self.sizes or ()):
            read, sampled = read + size, sampled + new[step]
            margin = 0.0 if self.complete else _error(sampled)
            if read > sampled / fraction * (1 + margin):
                return step
        return None

    def within(self, steps: int) -> "Examples":
        """What the first `steps` deliveries brought. The batches stay whole: the same batch at the
        same step is the same read, however often the data repeats."""
        return dataclasses.replace(
            self,
            examples=sum((self.sizes or ())[:steps]),
            keys={key: first for key, first in self.keys.items() if first < steps},
            sizes=(self.sizes or ())[:steps],
            counted=None,
        )


def judge_data(observed: dict[str, list[Session]], expected_workers: int, *, replicated: bool = False) -> Data:
    """`replicated`: the program means every worker to read the same examples (TF_DATA_SHARDING=replicated):
    what they shared is said, and fails nothing."""
    if expected_workers < 2 or not observed:
        return Data()
    read = {name: _read(sessions, "training") for name, sessions in sorted(observed.items())}
    if any(examples is None for examples in read.values()):
        return Data()  # Records older than the observer's keys of the data: nothing to judge.
    seen = {name: examples for name, examples in read.items() if examples.examples}
    evaluated = {
        name: examples
        for name, sessions in sorted(observed.items())
        if (examples := _read(sessions, "other")) is not None and examples.examples
    }
    apart = _apart(evaluated, len(observed))
    if not seen:
        return Data(
            line="data: not observed: no training step took its examples from a dataset the strategy distributed "
            f"(a generator or tensors fed to the step by hand): nothing is claimed about what each worker read{apart}",
            observed=False,
        )
    figures = {name: _figures(examples) for name, examples in read.items()}
    for name, examples in evaluated.items():
        figures[name]["evaluation"] = _figures(examples)
    unit = "elements" if any(examples.unit == "element" for examples in seen.values()) else "examples"
    missing = [name for name in read if name not in seen]
    if missing:
        problem = (
            f"{names(missing)} read no {unit} for training from the strategy's distributed dataset, "
            f"while {names(list(seen))} did"
        )
        return Data(problems=(problem,), observed=True, workers=figures)
    overlaps, window = _judged(seen, unit)
    if window and window.steps < window.of:
        for name, examples in _within(seen, window).items():
            figures[name]["one_pass"] = {"steps": window.steps, "examples": examples.examples}
    failed = _failed(overlaps)
    if failed and replicated:
        said = "; ".join(overlap.said for overlap in failed)
        return Data(
            line=f"data: replicated, as TF_DATA_SHARDING=replicated allows: {said}{apart}",
            observed=True,
            workers=figures,
            replicated=True,
        )
    if failed:
        return Data(problems=tuple(overlap.line for overlap in failed), observed=True, workers=figures)
    if window:
        seen = _within(seen, window)
    return Data(line=_proof(seen, overlaps, unit, window) + apart, observed=True, workers=figures)


def _judged(seen: dict[str, Examples], unit: str) -> tuple[list["_Overlap"], "_Window | None"]:
    """The pairs' overlaps that decide, and the steps they were taken over (None: the whole run)."""
    overlaps = _overlaps(seen, unit, None)
    if not _failed(overlaps) or not (window := _one_pass(seen)):
        return overlaps, None
    # Shared over a run that read its data again: whether they shared within one pass decides.
    overlaps = _overlaps(_within(seen, window), unit, window)
    own = _own_pass(seen)
    if _failed(overlaps) and (own is None or own.steps > window.steps):
        # Decided. Named over each worker's own pass (the whole run, if none read an example of its
        # own twice), which is longer where the workers read the same data: the cluster's pass
        # counts each example once for all of them.
        named = _overlaps(_within(seen, own) if own else seen, unit, own)
        if _failed(named):
            return named, own
    return overlaps, window


def _failed(overlaps: list["_Overlap"]) -> list["_Overlap"]:
    return [overlap for overlap in overlaps if overlap.share > TOLERATED]


def _within(seen: dict[str, Examples], window: "_Window") -> dict[str, Examples]:
    return {name: examples.within(window.steps) for name, examples in seen.items()}


def _overlaps(seen: dict[str, Examples], unit: str, window: "_Window | None") -> list["_Overlap"]:
    return [
        overlap
        for (first, a), (second, b) in itertools.combinations(seen.items(), 2)
        if (overlap := _overlap(first, a, second, b, unit, window))
    ]


@dataclasses.dataclass(frozen=True)
class _Window:
    steps: int  # Compared: the first this many.
    of: int  # Every worker's steps: the most any one took.
    distinct: float | None = None  # What the workers read between them over the run (the cluster's pass).

    def said(self) -> str:
        return f"in one pass over the data (the first {self.steps} of {self.of} steps)"


def _error(sampled: int) -> float:
    """How far, as a fraction, an estimate from a sketch's `sampled` keys may be off: three of its
    standard errors (1/sqrt of the sample)."""
    return 3 / math.sqrt(max(sampled, 9))


def _one_pass(seen: dict[str, Examples]) -> _Window | None:
    """The steps before the workers together had read more examples than the distinct ones they read
    over the run, past which the data's repeats begin; None to compare the whole run (shorter than a
    pass, or records older than the steps)."""
    if any(examples.sizes is None for examples in seen.values()):
        return None
    bound = min(examples.bound for examples in seen.values())
    union: set[int] = set().union(*(examples.keys for examples in seen.values()))
    if bound == float("inf"):
        distinct = float(len(union))
    else:
        sampled = sum(1 for key in union if key < bound)
        # An estimate may be high: a pass taken too long would count the first repeats as shared,
        # so it is taken that much shorter.
        distinct = sampled / (bound / _SPACE) * (1 - _error(sampled))
    steps = max(len(examples.sizes) for examples in seen.values())
    read = list(itertools.accumulate(
        sum(examples.sizes[index] for examples in seen.values() if index < len(examples.sizes))
        for index in range(steps)
    ))  # fmt: skip
    if not read or read[-1] <= distinct:
        return None
    within = sum(1 for total in read if total <= distinct)
    # A step larger than the data set repeats it at once: its first step is still compared.
    return _Window(steps=max(within, 1), of=steps, distinct=distinct)


def _own_pass(seen: dict[str, Examples]) -> _Window | None:
    """The steps before the first worker read an example of its own again; None when none did."""
    passes = [steps for examples in seen.values() if (steps := examples.fresh()) is not None]
    if not passes:
        return None
    return _Window(steps=max(min(passes), 1), of=max(len(examples.sizes or ()) for examples in seen.values()))


@dataclasses.dataclass(frozen=True)
class _Overlap:
    shared: float
    share: float  # Of the smaller worker's distinct examples.
    said: str  # Who shared what.
    cause: str

    @property
    def line(self) -> str:
        return f"{self.said}: {self.cause}"


def _overlap(first: str, a: Examples, second: str, b: Examples, unit: str, window: _Window | None) -> _Overlap | None:
    exact = a.complete and b.complete
    if exact:
        shared = float(len(a.keys.keys() & b.keys.keys()))
    else:
        covered = min(a.bound, b.bound)
        union = {key for key in a.keys.keys() | b.keys.keys() if key < covered}
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
            "(a shuffle before the shard not seeded alike on every worker, or no .shard)"
        )
    if window:
        said += f" {window.said()}"
    if same_batches:
        said += f", in identical batches at {same_batches} of {compared} steps"
    return _Overlap(shared, share, said, cause)


def _figures(examples: Examples) -> dict:
    figures = {"examples": examples.examples, "distinct": round(examples.estimated()), "exact": examples.complete}
    if examples.epochs and examples.sizes is not None:
        # Each epoch's examples, and (where every key was kept) how many it read for the first time.
        bounds = list(itertools.pairwise((0, *examples.epochs)))
        firsts = collections.Counter(examples.keys.values())
        figures["epochs"] = [
            {"examples": sum(examples.sizes[start:end])}
            | ({"new": sum(firsts[step] for step in range(start, end))} if examples.complete else {})
            for start, end in bounds
        ]
    return figures


def _each(seen: dict[str, Examples]) -> str:
    estimates = [examples.estimated() for examples in seen.values()]
    low, high = round(min(estimates)), round(max(estimates))
    return f"{low} distinct each" if low == high else f"{low} to {high} distinct each"


def _apart(evaluated: dict[str, Examples], workers: int) -> str:
    """What was delivered where no gradients were applied (a validation or evaluation pass), told
    apart from training's and not judged: a program may well evaluate every worker on the same data."""
    if not evaluated:
        return ""
    unit = "elements" if any(examples.unit == "element" for examples in evaluated.values()) else "examples"
    shared = sum(overlap.shared for overlap in _overlaps(evaluated, unit, None))
    told = "none shared" if not shared else f"{shared:.0f} shared"
    estimate = "" if all(examples.complete for examples in evaluated.values()) else ", estimated"
    who = "" if len(evaluated) == workers else f" on {names(list(evaluated))} alone"
    return f"; apart from training, not judged: an evaluation read {_each(evaluated)}{who}, {told}{estimate}"


def _proof(seen: dict[str, Examples], overlaps: list[_Overlap], unit: str, window: _Window | None) -> str:
    estimates = [examples.estimated() for examples in seen.values()]
    exact = all(examples.complete for examples in seen.values())
    each = _each(seen)
    shared = sum(overlap.shared for overlap in overlaps)
    told = "none shared" if not overlaps else f"{shared:.0f} shared (under {TOLERATED:.0%}: the same example twice?)"
    total = f"{sum(estimates) - shared:.0f} in all"
    if window:
        total += f" {window.said()}; {window.distinct:.0f} over the run, read again since"
    estimate = "" if exact else " (estimated from a sample of their keys)"
    return f"data: each worker read its own {unit}: {each}, {told}, {total}{estimate}"


def _read(sessions: list[Session], use: str) -> Examples | None:
    """The worker's examples of one use (`training`, `other`) over all its sessions (a restarted
    run's each, its deliveries after the one before's), or None for records older than the
    observer's keys, or of no such use."""
    records = [record for session in sessions for record in session.data if record.get("use") == use]
    if not records:
        return None
    keys: dict[int, int] = {}
    epochs: list[int] = []
    bound = float("inf")
    before = 0
    for record in records:
        hexes = record.get("keys") or ()
        firsts = record.get("first") or [0] * len(hexes)
        for key, delivery in zip(hexes, firsts, strict=True):
            keys.setdefault(int(key, 16), before + delivery)
        if hexes and not (isinstance(record.get("distinct"), int) and record["distinct"] <= len(hexes)):
            bound = min(bound, float(int(max(hexes), 16)))  # A sketch covers the keys up to its largest only.
        epochs += [before + deliveries for deliveries in record.get("epochs") or ()]
        before += int(record.get("deliveries") or 0)
    complete = bound == float("inf")
    if not complete:
        keys = {key: first for key, first in keys.items() if key <= bound}  # The sessions' sketches, as one.
    counts = [record.get("distinct") for record in records]
    has_sizes = all("sizes" in record for record in records)
    return Examples(
        examples=sum(int(record.get("examples") or 0) for record in records),
        keys=keys,
        complete=complete,
        bound=bound,
        epochs=tuple(epochs),
        unit="example" if all(record.get("unit") == "example" for record in records) else "element",
        batches=tuple(batch for record in records for batch in record.get("batches") or ()),
        sizes=tuple(size for record in records for size, times in record["sizes"] for _ in range(times))
        if has_sizes
        else None,
        counted=None if complete or len(records) != 1 else counts[0],
    )

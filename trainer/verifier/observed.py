"""The observer's records in a worker's log, read back: what its program's strategy was and its model's state.

The observer (trainer/observer/) writes `{"event": "observed", "kind": KIND, "session": S, ...}`
lines, which the launcher copies into the worker's log when the program ends:
- `strategy`: `class`, `replicas`, `cluster` (`{"worker": [ADDRESS, ...]}`), `task` (`type`,
  `index`), and in logs older than the launcher's count of TensorFlow's connections, `net` (that
  host's interface counters, `sent` and `received` bytes, read by trainer/verifier/traffic.py only
  when a log has no such count);
- `state`: `point` (`epoch`, `checkpoint` or `end`), `index` (the epoch's number, the checkpoint's,
  1 for the end), `step` (the optimizer's), `variables` (`[name, kind, dtype, shape, hash]` each),
  `bytes`, `trainable_bytes`, `unreadable` (variables that could not be read), `trained` (the names,
  among `variables`, of those an optimizer updated or holds: absent in records older than that),
  `trained_unreadable`, `steps_run` and `reduced_bytes` (the end's: the steps this process took,
  and each optimizer's steps times its dense gradients' bytes, summed), `logs` (an epoch's),
  `net` (older logs'), `seconds` (what the fingerprint took);
- `update`: how one optimizer's gradients were reduced, once per kind (trainer/observer/updates.py):
  `optimizer` (its class), `context`, `replicas`, `reduced` (`optimizer`, `program`, `no` or
  `unknown`), `skipped`;
- `data`: what the program's distributed datasets delivered, one record per `use` (`training`, or
  `other`: delivered where no gradients were applied), written at its end (trainer/observer/data.py):
  `deliveries`, `examples`, `unit` (`example`, or `element` when elements were keyed whole),
  `distinct` (exact, or null past what is counted), `keys` (the smallest distinct keys, hex, all
  of them when `distinct` is at most their number), `first` (the delivery that first brought each
  of `keys`: absent in older records), `sizes` (the examples of each delivery, run-length coded as
  `[examples, deliveries]` pairs: absent in older records), `batches` (the first batches' keys, in
  order), `epochs` (training's: the deliveries so far at each end of a Keras epoch; empty without
  `fit`, absent in older records);
- `error`: `where` and `error`, an error of the observer's own.

A session is one process's records. A log may hold several: a program's subprocesses that import
TensorFlow, and each run of a cluster restarted by the keeper, in order. The verdict reads them once,
into a worker's record (trainer/verifier/worker_log.py), from which trainer/verifier/synchronization.py
judges them.
"""

import dataclasses
from collections.abc import Iterable

from trainer.verifier.events import events

COMPARED = frozenset({"trainable", "mirrored", "outside"})  # Kinds that must be bitwise the same on every worker.


@dataclasses.dataclass(frozen=True, kw_only=True)
class Variable:
    name: str
    kind: str
    dtype: str
    shape: str
    hash: str

    @property
    def compared(self) -> bool:
        return self.kind in COMPARED


@dataclasses.dataclass(frozen=True, kw_only=True)
class State:
    point: str
    index: int
    step: int | None
    variables: tuple[Variable, ...]
    bytes: int
    trainable_bytes: int
    logs: dict
    net: dict | None
    seconds: float
    time: float = 0.0
    unreadable: int = 0
    # The names of the variables an optimizer updated (and the optimizers' own); None when the record
    # predates the field, so that what was trained is not known.
    trained: tuple[str, ...] | None = None
    trained_unreadable: int = 0
    steps_run: int | None = None  # The steps this process took (the end only; not in older records).
    # What those steps all-reduced: each optimizer's steps times its dense gradients' bytes (the end only).
    reduced_bytes: int | None = None

    @property
    def key(self) -> tuple:
        """What the point is, alike on every worker: an epoch by its number, the end as itself, a
        checkpoint by its step and what it holds (a chief may write checkpoints the others do not, so
        the order each process wrote them in does not match them up)."""
        if self.point == "checkpoint" and self.step is not None:
            return self.point, self.step, frozenset(v.name for v in self.variables)
        return self.point, self.index

    @property
    def compared(self) -> tuple[Variable, ...]:
        return tuple(v for v in self.variables if v.compared)

    @property
    def label(self) -> str:
        where = "the end" if self.point == "end" else f"{self.point} {self.index}"
        return where if self.step is None else f"{where} (step {self.step})"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Session:
    strategy: dict | None
    states: tuple[State, ...]
    errors: tuple[str, ...]
    updates: tuple[dict, ...] = ()  # How its optimizers' gradients were reduced; none in older records.
    data: tuple[dict, ...] = ()  # What its distributed datasets delivered, one record per use; none in older records.


def sessions(log: str) -> list[Session]:
    """The program's sessions in the order they began: those that made a strategy, else those that recorded state."""
    return sessions_of(events(log, "observed"))


def sessions_of(observed: Iterable[dict]) -> list[Session]:
    """`sessions`, from the log's `observed` events, in order."""
    order: dict[str, list[dict]] = {}
    for record in observed:
        order.setdefault(str(record.get("session")), []).append(record)
    found = [_session(records) for records in order.values()]
    with_strategy = [session for session in found if session.strategy is not None]
    return with_strategy or [session for session in found if session.states or session.errors]


def _session(records: list[dict]) -> Session:
    strategies = [record for record in records if record.get("kind") == "strategy"]
    states = (_state(record) for record in records if record.get("kind") == "state")
    return Session(
        strategy=strategies[0] if strategies else None,
        states=tuple(state for state in states if state is not None),
        errors=tuple(f"{r.get('where')}: {r.get('error')}" for r in records if r.get("kind") == "error"),
        updates=tuple(record for record in records if record.get("kind") == "update"),
        data=tuple(record for record in records if record.get("kind") == "data"),
    )


def _state(record: dict) -> State | None:
    """The state a record holds, or None when it is not one the observer wrote (a line of another shape)."""
    try:
        return _parse_state(record)
    except (TypeError, ValueError):
        return None


def _parse_state(record: dict) -> State:
    return State(
        point=str(record.get("point")),
        index=int(record.get("index") or 0),
        step=record.get("step"),
        variables=tuple(_variable(*entry) for entry in record.get("variables", ())),
        bytes=int(record.get("bytes") or 0),
        trainable_bytes=int(record.get("trainable_bytes") or 0),
        logs=dict(record.get("logs") or {}),
        net=record.get("net"),
        seconds=float(record.get("seconds") or 0.0),
        time=float(record.get("time") or 0.0),
        unreadable=int(record.get("unreadable") or 0),
        trained=tuple(map(str, record["trained"])) if isinstance(record.get("trained"), list) else None,
        trained_unreadable=int(record.get("trained_unreadable") or 0),
        steps_run=int(record["steps_run"]) if isinstance(record.get("steps_run"), int) else None,
        reduced_bytes=int(record["reduced_bytes"]) if isinstance(record.get("reduced_bytes"), int) else None,
    )


def _variable(name, kind, dtype, shape, hash_) -> Variable:
    return Variable(name=str(name), kind=str(kind), dtype=str(dtype), shape=str(shape), hash=str(hash_))

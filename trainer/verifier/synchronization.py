"""Whether the workers trained in sync: their model states bit for bit, their strategies, their traffic.

Under MultiWorkerMirroredStrategy every worker starts from the chief's broadcast values and
applies the same all-reduced update to them, so at every point the observer recorded
(trainer/verifier/observed.py) each compared variable must have the same bytes on every worker.
ON_READ variables (`local`) are each worker's own by design and are listed, not compared.
Identical weights alone do not prove synchronization: two workers fed the same data with the same
seeds train identically without ever exchanging a gradient. So each worker must also have sent and
received, while it trained, at least what one all-reduce of its trainable variables moves each way,
(N-1)/N of their bytes with N workers (a ring all-reduce moves twice that, every step).
"""

import dataclasses

from trainer.contract import cluster as cluster_config
from trainer.verifier.observed import Session, State

SHOWN = 4  # Variables named in a difference; the rest are counted.


@dataclasses.dataclass(frozen=True, kw_only=True)
class Synchronization:
    worker_problems: dict[str, str]  # A worker's own: no record, no strategy, the wrong cluster...
    differences: tuple[str, ...]  # Across workers: states that differ, points missing, no traffic.
    lines: tuple[str, ...] = ()  # What was proven, for the table.
    proof: str | None = None  # The same in a few words, for the PASS line.
    replicas: dict[str, int] = dataclasses.field(default_factory=dict)  # As each worker's strategy had them.
    fit_metrics: dict[str, dict] = dataclasses.field(default_factory=dict)  # From `Model.fit`'s epoch logs.


def judge_synchronization(
    observed: dict[str, list[Session]], *, expected_workers: int, judged: set[str], cluster: list[str] | None = None
) -> Synchronization:
    """`judged`: the workers that ended well, whose own records must be complete; `cluster`: the harness's addresses."""
    worker_problems = {}
    for name in judged:
        problem = _worker_problem(name, observed.get(name, []), expected_workers, cluster)
        if problem:
            worker_problems[name] = problem
    differences = list(filter(None, [_first_difference(observed)]))
    everyone_well = len(judged) == expected_workers == len(observed) and not worker_problems
    if everyone_well and not differences:
        differences += _missing_points(observed) + _traffic(observed, expected_workers)
    lines, proof = _proven(observed, expected_workers) if everyone_well and not differences else ((), None)
    return Synchronization(
        worker_problems=worker_problems,
        differences=tuple(differences),
        lines=lines,
        proof=proof,
        replicas={name: int(s[-1].strategy["replicas"]) for name, s in observed.items() if s and s[-1].strategy},
        fit_metrics={name: metrics for name, s in observed.items() if (metrics := _fit_metrics(s))},
    )


def _worker_problem(name: str, sessions: list[Session], expected_workers: int, cluster: list[str] | None) -> str | None:
    if not sessions:
        return (
            "no record of its model state: the observer recorded nothing "
            "(its program did not import TensorFlow, or ran outside this harness's image and launcher)"
        )
    session = sessions[-1]
    strategy = session.strategy
    if strategy is None and expected_workers > 1:
        return "its program made no tf.distribute strategy: it trained alone, synchronized with no peer"
    if strategy is not None:
        problem = _strategy_problem(name, strategy, expected_workers, cluster)
        if problem:
            return problem
    if not session.states:
        errors = f": the observer failed at {session.errors[0]}" if session.errors else ""
        return f"no record of its model state at its end{errors}"
    outside = [v.name for v in session.states[-1].variables if v.kind == "outside"]
    if outside and strategy is not None and expected_workers > 1:
        return (
            f"{len(outside)} trainable variable(s) made outside strategy.scope(), so trained by this worker alone: "
            + _names(outside)
        )
    return None


def _strategy_problem(name: str, strategy: dict, expected_workers: int, cluster: list[str] | None) -> str | None:
    kind, replicas = strategy.get("class"), strategy.get("replicas")
    if replicas != expected_workers:
        return f"replicas={replicas}, expected {expected_workers}: its {kind} had {replicas} replica(s) in sync"
    resolved, index = _resolved(strategy)
    if cluster and resolved is not None and resolved != cluster:
        return f"its {kind} resolved the cluster {resolved}, not the harness's {cluster}"
    hosts = [cluster_config.host_of(address) for address in resolved or ()]
    if name in hosts and index != hosts.index(name):
        return f"its {kind} took it for worker {index} of {resolved}, not {name}"
    return None


def _resolved(strategy: dict) -> tuple[list[str] | None, int | None]:
    """The cluster the strategy resolved, as one ordered list, and this worker's place in it: a
    `chief` (TFJob's form) is worker 0, ahead of the `worker` job (trainer/contract/cluster.py)."""
    jobs = strategy.get("cluster") or {}
    task = strategy.get("task") or {}
    index = task.get("index")
    if "chief" not in jobs:
        return jobs.get("worker"), index
    chief = list(jobs.get("chief") or [])
    if task.get("type") == "worker" and isinstance(index, int):
        index += len(chief)
    return chief + list(jobs.get("worker") or []), index


def _first_difference(observed: dict[str, list[Session]]) -> str | None:
    runs = max((len(sessions) for sessions in observed.values()), default=0)
    for run in range(runs):
        present = {name: sessions[run] for name, sessions in observed.items() if len(sessions) > run}
        for key in _keys(present.values()):
            states = {name: state for name, session in present.items() if (state := _at(session, key))}
            if len(states) < 2:
                continue
            difference = _compare(states)
            if difference:
                first = next(iter(states.values()))
                during = f" (run {run + 1} of the cluster)" if runs > 1 else ""
                return f"model state differs at {first.label}{during}: {difference}"
    return None


def _keys(sessions) -> list[tuple[str, int]]:
    keys = []
    for session in sessions:
        keys += [state.key for state in session.states if state.key not in keys]
    return keys


def _at(session: Session, key: tuple[str, int]) -> State | None:
    """The last state recorded at `key` (a re-run epoch after a resume replaces the earlier one)."""
    return next((state for state in reversed(session.states) if state.key == key), None)


def _compare(states: dict[str, State]) -> str | None:
    """Which workers hold other bytes than the first, and in which variables; None if all are the same."""
    names = list(states)
    reference = _compared(states[names[0]])
    found = []
    for name in names[1:]:
        theirs = _compared(states[name])
        differing = [key for key in reference if key in theirs and reference[key] != theirs[key]]
        if differing:
            found.append(
                f"{name} differs from {names[0]} in {len(differing)} of {len(reference)} compared variables: "
                + _names(differing)
            )
        lacking = [key for key in reference if key not in theirs]
        extra = [key for key in theirs if key not in reference]
        if lacking:
            found.append(f"{name} lacks {_names(lacking)}, which {names[0]} has")
        if extra:
            found.append(f"{name} has {_names(extra)}, which {names[0]} lacks")
    return "; ".join(found) or None


def _compared(state: State) -> dict[str, tuple[str, str, str]]:
    return {v.name: (v.dtype, v.shape, v.hash) for v in state.variables if v.compared}


def _missing_points(observed: dict[str, list[Session]]) -> list[str]:
    """Epochs and ends some workers recorded and others did not. Checkpoints are left out: a program
    may write them on its chief alone (against TensorFlow's advice), and that is no divergence."""
    last = {name: sessions[-1] for name, sessions in observed.items()}
    missing = []
    for key in (key for key in _keys(last.values()) if key[0] != "checkpoint"):
        lacking = [name for name, session in last.items() if _at(session, key) is None]
        if lacking:
            having = next(_at(session, key) for session in last.values() if _at(session, key))
            missing.append(f"no model state at {having.label} on {', '.join(lacking)}, which the others recorded")
    return missing


def _traffic(observed: dict[str, list[Session]], expected_workers: int) -> list[str]:
    """A problem when a worker moved less than one all-reduce of its trainable variables while it trained."""
    exchanged = _exchanged(observed)
    trainable = max((s[-1].states[-1].trainable_bytes for s in observed.values()), default=0)
    bound = trainable * (expected_workers - 1) / expected_workers
    if expected_workers < 2 or not bound or len(exchanged) < len(observed):
        return []
    short = {name: figures for name, figures in exchanged.items() if min(figures) < bound}
    if not short:
        return []
    shown = "; ".join(
        f"{name} sent {size(figures[0])} and received {size(figures[1])}" for name, figures in short.items()
    )
    return [
        f"the workers exchanged less than one all-reduce of their {size(trainable)} of trainable variables while "
        f"training ({size(bound)} each way): {shown}: no gradient crossed the network, so they never synchronized"
    ]


def _exchanged(observed: dict[str, list[Session]]) -> dict[str, tuple[int, int]]:
    """Each worker's bytes sent and received from its strategy's start to its last state, where both were read."""
    found = {}
    for name, sessions in observed.items():
        session = sessions[-1]
        start = (session.strategy or {}).get("net")
        end = session.states[-1].net if session.states else None
        if isinstance(start, dict) and isinstance(end, dict):
            found[name] = (end["sent"] - start["sent"], end["received"] - start["received"])
    return found


def _proven(observed: dict[str, list[Session]], expected_workers: int) -> tuple[tuple[str, ...], str]:
    """What a passing run proved: the states compared at every point, and the traffic while training."""
    sessions = next(iter(observed.values()))
    points = [state for session in sessions for state in session.states]
    last = points[-1]
    # The figures of the fullest point: a program's end may hold less than its checkpoints did, when
    # it let its optimizer go before it exited (the observer holds no variable alive).
    counts = [sum(1 for v in point.variables if v.compared) for point in points]
    fullest = points[counts.index(max(counts))]
    compared = [v for v in fullest.variables if v.compared]
    local = [v.name for v in fullest.variables if v.kind == "local"]
    span = f"at {last.label}" if len(points) == 1 else f"from {points[0].label} to {last.label}"
    local_part = f"; local to each worker (ON_READ), not compared: {_names(local)}" if local else ""
    at = _count(len(points), "point")
    up_to = "up to " if len(set(counts)) > 1 else ""
    state = f"{up_to}{_count(len(compared), 'variable')}, {size(sum(_bytes(v) for v in compared))}"
    workers = f"{len(observed)} of {expected_workers} workers"
    lines = [f"state: bitwise identical on {workers} at {at}, {span}: {state}{local_part}"]
    exchanged = _exchanged(observed)
    if expected_workers > 1 and len(exchanged) == len(observed):
        sent = min(figures[0] for figures in exchanged.values())
        received = min(figures[1] for figures in exchanged.values())
        lines.append(
            f"traffic: while training, every worker sent at least {size(sent)} to its peers and received "
            f"at least {size(received)}"
        )
    elif expected_workers > 1:
        lines.append("traffic: not measured (a worker's network counters could not be read, or it ran on loopback)")
    return tuple(lines), f"weights identical at {at} ({state})"


def _fit_metrics(sessions: list[Session]) -> dict | None:
    """Final metrics from `Model.fit`'s epoch logs: the first epoch's loss and the last epoch's logs."""
    epochs = [state for session in sessions for state in session.states if state.point == "epoch" and state.logs]
    if not epochs:
        return None
    metrics = {"epochs": epochs[-1].index}
    if "loss" in epochs[0].logs:
        metrics["initial_loss"] = epochs[0].logs["loss"]
    metrics.update({f"final_{key}": value for key, value in epochs[-1].logs.items()})
    return metrics


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


_ITEM_SIZES = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
}


def _bytes(variable) -> int:
    """A variable's size from its dtype and shape (a string variable's is unknown: 0)."""
    count = 1
    for dimension in variable.shape.split("x") if variable.shape != "scalar" else ():
        count *= int(dimension)
    return count * _ITEM_SIZES.get(variable.dtype, 0)


def _names(names: list[str]) -> str:
    more = f" (and {len(names) - SHOWN} more)" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(count) < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GB"

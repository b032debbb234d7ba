"""Whether the workers trained in sync: their model states bit for bit, their strategies, their traffic.

Under MultiWorkerMirroredStrategy every worker starts from the chief's broadcast values and
applies the same all-reduced update to them, so at every point the observer recorded
(trainer/verifier/observed.py) each compared variable must have the same bytes on every worker:
epochs matched by number, checkpoints by step and content, the end as itself. ON_READ variables
(`local`) are each worker's own by design and are listed, not compared. A worker that failed is
reported for its failure; its partial state is compared with nobody's.
Identical weights alone do not prove synchronization: the state must hold what was trained, and
the gradients must have been all-reduced (trainer/verifier/evidence.py) and have crossed the
network (trainer/verifier/traffic.py). Nor do they prove the workers trained on examples of their
own (trainer/verifier/data.py).
"""

import dataclasses

from trainer.contract import cluster as cluster_config
from trainer.verifier.data import Data, judge_data
from trainer.verifier.evidence import evidence_problem, gradients_line, gradients_problem, trained_part
from trainer.verifier.observed import Session, State
from trainer.verifier.text import count, names, size, variable_bytes
from trainer.verifier.traffic import judge_traffic


@dataclasses.dataclass(frozen=True, kw_only=True)
class Synchronization:
    worker_problems: dict[str, str]  # A worker's own: no record, no strategy, the wrong cluster...
    differences: tuple[str, ...]  # Across workers: states that differ, points missing, no traffic.
    lines: tuple[str, ...] = ()  # What was proven, for the table.
    proof: str | None = None  # The same in a few words, for the PASS line.
    replicas: dict[str, int] = dataclasses.field(default_factory=dict)  # As each worker's strategy had them.
    fit_metrics: dict[str, dict] = dataclasses.field(default_factory=dict)  # From `Model.fit`'s epoch logs.
    # What each worker's input delivered (trainer/verifier/data.py): its problems are the verdict's, apart
    # from the model states' `differences`, which they do not make less proven.
    data: Data = dataclasses.field(default_factory=Data)
    # Where the states first differed, as data for the run's report (tfcluster/report/): `point`,
    # `index`, `step` and the cluster's `run` (1 unless the keeper restarted it).
    first_differing: dict | None = None


def judge_synchronization(
    observed: dict[str, list[Session]],
    *,
    expected_workers: int,
    judged: set[str],
    cluster: list[str] | None = None,
    counted: dict[str, dict] | None = None,
    data_replicated: bool = False,
) -> Synchronization:
    """`judged`: the workers that ended well, whose own records must be complete; `cluster`: the harness's
    addresses; `counted`: each worker's launcher's count of its TensorFlow connections' bytes;
    `data_replicated`: every worker may read the same examples (trainer/verifier/data.py)."""
    worker_problems = {}
    for name in judged:
        problem = _worker_problem(name, observed.get(name, []), expected_workers, cluster)
        if problem:
            worker_problems[name] = problem
    # A worker that failed is reported for its failure: its partial state is no difference of its own.
    first = _first_difference({n: s for n, s in observed.items() if n in judged})
    differences = [first[0]] if first else []
    everyone_well = len(judged) == expected_workers == len(observed) and not worker_problems
    lines, proof, data = ((), None, Data())
    if everyone_well and not differences:
        traffic = judge_traffic(observed, counted or {}, expected_workers)
        data = judge_data(observed, expected_workers, replicated=data_replicated)
        differences += _missing_points(observed) + _unproven(observed, expected_workers) + list(traffic.problems)
        if not differences:
            lines, proof = _proven(observed, expected_workers)
            lines += tuple(filter(None, [gradients_line(observed), traffic.line, data.line]))
    return Synchronization(
        worker_problems=worker_problems,
        differences=tuple(differences),
        lines=lines,
        proof=proof,
        replicas={name: int(s[-1].strategy["replicas"]) for name, s in observed.items() if s and s[-1].strategy},
        fit_metrics={name: metrics for name, s in observed.items() if (metrics := _fit_metrics(s))},
        data=data,
        first_differing=first[1] if first else None,
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
    outside = list(dict.fromkeys(v.name for state in session.states for v in state.variables if v.kind == "outside"))
    if outside and strategy is not None and expected_workers > 1:
        return (
            f"{len(outside)} trainable variable(s) made outside strategy.scope(), so trained by this worker alone: "
            + names(outside)
        )
    return gradients_problem(session) if strategy is not None and expected_workers > 1 else None


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


def _first_difference(observed: dict[str, list[Session]]) -> tuple[str, dict] | None:
    """The first point the judged workers' states differ at: as the verdict says it, and as data."""
    runs = max((len(sessions) for sessions in observed.values()), default=0)
    for run in range(runs):
        present = {name: sessions[run] for name, sessions in observed.items() if len(sessions) > run}
        for key in _keys(present.values()):
            if key[0] == "end" and run < runs - 1:
                # A run the keeper restarted ended in a failure, often inside a step whose
                # all-reduce aborted on one worker and not on another: its end is no point where
                # the workers agree. Its finished epochs and checkpoints are, and are compared.
                continue
            states = {name: state for name, session in present.items() if (state := _at(session, key))}
            if len(states) < 2:
                continue
            difference = _compare(states)
            if difference:
                first = next(iter(states.values()))
                during = f" (run {run + 1} of the cluster)" if runs > 1 else ""
                where = {"point": first.point, "index": first.index, "step": first.step, "run": run + 1}
                return f"model state differs at {first.label}{during}: {difference}", where
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
    workers = list(states)
    reference = _compared(states[workers[0]])
    found = []
    for name in workers[1:]:
        theirs = _compared(states[name])
        differing = [key for key in reference if key in theirs and reference[key] != theirs[key]]
        if differing:
            found.append(
                f"{name} differs from {workers[0]} in {len(differing)} of {len(reference)} compared variables: "
                + names(differing)
            )
        lacking = [key for key in reference if key not in theirs]
        extra = [key for key in theirs if key not in reference]
        if lacking:
            found.append(f"{name} lacks {names(lacking)}, which {workers[0]} has")
        if extra:
            found.append(f"{name} has {names(extra)}, which {workers[0]} lacks")
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


def _unproven(observed: dict[str, list[Session]], expected_workers: int) -> list[str]:
    """Workers whose states, identical as they are, prove nothing: nothing compared, or not what was trained."""
    found = []
    for name, sessions in observed.items():
        problem = evidence_problem(sessions[-1], several=expected_workers > 1)
        if problem:
            found.append(f"{name}: not proven: {problem}")
    return found


def _proven(observed: dict[str, list[Session]], expected_workers: int) -> tuple[tuple[str, ...], str]:
    """What a passing run proved: the states compared at every point."""
    sessions = next(iter(observed.values()))
    points = [state for session in sessions for state in session.states]
    last = points[-1]
    # The figures of the fullest point: a checkpoint may hold more than what was trained (an epoch
    # counter, a metric), and older records' ends less than their checkpoints.
    counts = [len(point.compared) for point in points]
    fullest = points[counts.index(max(counts))]
    compared = fullest.compared
    local = [v.name for v in fullest.variables if v.kind == "local"]
    span = f"at {last.label}" if len(points) == 1 else f"from {points[0].label} to {last.label}"
    local_part = f"; local to each worker (ON_READ), not compared: {names(local)}" if local else ""
    at = count(len(points), "point")
    up_to = "up to " if len(set(counts)) > 1 else ""
    compared_part = (
        f"{up_to}{count(len(compared), 'variable')}, {size(sum(variable_bytes(v.dtype, v.shape) for v in compared))}"
    )
    state = trained_part(last, at=len(points) > 1) + compared_part
    workers = f"{len(observed)} of {expected_workers} workers"
    lines = [f"state: bitwise identical on {workers} at {at}, {span}: {state}{local_part}"]
    return tuple(lines), f"weights identical at {at} ({trained_part(last, at=False)}{compared_part})"


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

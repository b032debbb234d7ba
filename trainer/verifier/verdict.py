"""The verdict: per worker, what went wrong; across workers, whether their model states and metrics agree.

The model states are the proof of synchronization (trainer/verifier/synchronization.py); the
metrics a program prints are compared too, but under MultiWorkerMirroredStrategy they are
all-reduced before any worker sees them, so they agree even when the weights do not.

The problems come in the order things went wrong: the failure that started it first, with its own
error, and the workers that only lost a peer to it after; an error several workers raised is said
once (trainer/verifier/causes.py).

Each worker's log is read once, into a record (trainer/verifier/worker_log.py): every check here
judges that record, never the log's text.
"""

import dataclasses
import math

from trainer.contract.exitcodes import ExitCode
from trainer.verifier import causes
from trainer.verifier.causes import Cause
from trainer.verifier.faults import problems as fault_problems
from trainer.verifier.metrics import IDENTITY_KEYS
from trainer.verifier.reasons import one_line
from trainer.verifier.recovery import Recovery
from trainer.verifier.stragglers import slowest_worker
from trainer.verifier.synchronization import Synchronization, judge_synchronization
from trainer.verifier.worker_log import WorkerLog, read


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerReport:
    """One worker as a source saw it. `exit_code` is None when the source cannot know it."""

    name: str
    # "exited", "missing", "running", "killed", "log" (a saved log, exit unknown) or "lost" (nothing
    # left to read, and `reason` says why: its host went down, say).
    state: str
    exit_code: int | None
    log: str
    reason: str | None = None  # Why it exited, in its status's words, when the status says.
    # Its training program's wall and CPU time and its CPU limit, when its status says
    # (trainer/verifier/stragglers.py); a saved log does not.
    usage: dict | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerOutcome:
    name: str
    status: str
    metrics: dict | None
    problem: str | None
    cause: Cause = Cause.OWN  # Whether it failed of its own or only lost a peer: the problems' order.
    # The error its program raised of its own accord (trainer/verifier/reasons.py, `own_error`), when
    # its problem says that error: the verdict says once an error several workers raised.
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class _Status:
    """A worker's status and problem as its report alone says, with why it failed (`Cause`, `WorkerOutcome.error`)."""

    status: str
    problem: str | None
    cause: Cause = Cause.OWN
    error: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verdict:
    workers: tuple[WorkerOutcome, ...]
    differences: tuple[str, ...]
    metrics: dict  # The agreed metrics (those of the first worker that reported any).
    expected_workers: int
    recovery: Recovery | None = None  # What the keeper did, when there is one.
    network: tuple[str, ...] = ()  # Each shaper's profile and measured links (compose.network.yaml).
    links: dict = dataclasses.field(
        default_factory=dict
    )  # Every measured link, by worker and peer (trainer/verifier/links.py).
    # The network faults the shapers injected, as they recorded them (trainer/verifier/faults.py).
    faults: tuple[dict, ...] = ()
    straggler: str | None = None  # The slowest worker, when the spread is large: information, not a problem.
    # Each worker's program's usage as its status recorded it (trainer/contract/usage.py), by name.
    usage: dict[str, dict] = dataclasses.field(default_factory=dict)
    # What the workers' model states, strategies and traffic showed (trainer/verifier/synchronization.py).
    synchronization: Synchronization = dataclasses.field(
        default_factory=lambda: Synchronization(worker_problems={}, differences=())
    )

    @property
    def problems(self) -> tuple[str, ...]:
        keeper = (f"keeper: {self.recovery.problem}",) if self.recovery and self.recovery.problem else ()
        # The keeper's first: it names the failed workers in the order they failed, and the workers
        # it stopped on giving up show only as killed.
        workers = causes.in_order(self.workers, cluster=max(self.expected_workers, len(self.workers)))
        return (
            keeper
            + workers
            + self.synchronization.differences
            + self.synchronization.data.problems
            + self.differences
            + fault_problems(self.faults)
        )

    @property
    def passed(self) -> bool:
        return not self.problems


def judge(
    reports: list[WorkerReport],
    *,
    expected_workers: int,
    tolerance: float = 0.0,
    recovery: Recovery | None = None,
    network: tuple[str, ...] = (),
    links: dict | None = None,
    faults: tuple[dict, ...] = (),
    cluster: list[str] | None = None,
    unknown_exits_fail: bool = False,
    data_replicated: bool = False,
) -> Verdict:
    """`cluster`: the harness's worker addresses, when known, which every worker's strategy must have
    resolved. `unknown_exits_fail`: a saved log given no exit code fails (scripts/verify's default).
    `data_replicated`: the program means every worker to read the same examples (TF_DATA_SHARDING)."""
    workers = [(report, read(report.log)) for report in reports]
    observed = {report.name: list(log.sessions) for report, log in workers if report.state not in ("missing", "lost")}
    statuses = {report.name: _status_and_problem(report, log) for report, log in workers}
    synchronization = judge_synchronization(
        observed,
        expected_workers=expected_workers,
        judged={name for name, status in statuses.items() if status.problem is None},
        cluster=cluster,
        counted={report.name: found for report, log in workers if (found := log.connections)},
        data_replicated=data_replicated,
    )
    outcomes = [
        _judge_worker(report, log, statuses[report.name], expected_workers=expected_workers, sync=synchronization)
        for report, log in workers
    ]
    if unknown_exits_fail:
        outcomes = [_unknown_exit_failed(outcome) if outcome.status == "log" else outcome for outcome in outcomes]
    if len(reports) < expected_workers:
        outcomes.append(
            WorkerOutcome(
                name=f"({expected_workers - len(reports)} more)",
                status="missing",
                metrics=None,
                problem=f"only {len(reports)} of {expected_workers} expected workers reported",
            )
        )
    reporting = [outcome for outcome in outcomes if outcome.metrics is not None]
    differences = _differences(reporting, tolerance)
    agreed = {
        key: value for key, value in (reporting[0].metrics if reporting else {}).items() if key not in IDENTITY_KEYS
    }
    return Verdict(
        workers=tuple(outcomes),
        differences=tuple(differences),
        metrics=agreed,
        expected_workers=expected_workers,
        recovery=recovery,
        network=network,
        links=links or {},
        faults=faults,
        straggler=slowest_worker((report.name, report.usage) for report in reports),
        usage={report.name: report.usage for report in reports if isinstance(report.usage, dict)},
        synchronization=synchronization,
    )


def _judge_worker(
    report: WorkerReport, log: WorkerLog, status: _Status, *, expected_workers: int, sync: Synchronization
) -> WorkerOutcome:
    """A worker's metrics and problem, from its status, its log's record and what synchronization found.

    Its metrics are those its program printed, else those `Model.fit` logged (the observer's epochs),
    with `replicas` as its strategy had them where the observer saw its strategy. Its problem is the
    first of these that holds:
    1. its status's (`_status_and_problem`): it failed, was killed, never started...;
    2. it has no metrics and its log shows why (a known failure, an error line), unless the observer
       saw the strategy of a live worker: then synchronization says more;
    3. synchronization's, of its own (no record, the wrong strategy or cluster, outside variables...);
    4. it has no metrics and its strategy was not seen: nothing says it trained;
    5. its `replicas` are not the cluster's.
    Past the first three, a program that printed no metrics but whose strategy was seen has `replicas`
    alone for its metrics: its state is the proof. Its `error` is its status's, when its problem is.
    """
    replicas = sync.replicas.get(report.name)
    metrics = log.metrics or sync.fit_metrics.get(report.name)
    if metrics is not None and replicas is not None:
        metrics = {**metrics, "replicas": replicas}
    problem = status.problem  # 1.
    if problem is None and metrics is None and (replicas is None or report.state == "log"):  # 2.
        problem = _without_metrics(log) if log.diagnosis or log.reason_line else None
    if problem is None:  # 3.
        problem = sync.worker_problems.get(report.name)
    if problem is None and metrics is None and replicas is not None:
        metrics = {"replicas": replicas}  # A program that prints nothing: its state is the proof.
    if problem is None and metrics is None:  # 4.
        problem = _without_metrics(log)
    elif problem is None and metrics.get("replicas") != expected_workers:  # 5.
        problem = f"replicas={metrics.get('replicas')}, expected {expected_workers}"
    return WorkerOutcome(
        name=report.name,
        status=status.status,
        metrics=metrics,
        problem=problem,
        cause=status.cause,
        error=status.error if problem == status.problem else None,
    )


def _unknown_exit_failed(outcome: WorkerOutcome) -> WorkerOutcome:
    """A saved log with no exit code given: whatever it says, the worker may not have exited 0."""
    if outcome.problem is not None:
        return outcome  # Its log already says what went wrong.
    problem = "exit status unknown: give it (--exit-codes, --exit-codes-from), or pass --allow-unknown-exits"
    return dataclasses.replace(outcome, problem=problem)


def _status_and_problem(report: WorkerReport, log: WorkerLog) -> _Status:
    if report.state == "missing":
        return _Status("missing", "missing: it never started (no launcher of that name reported)")
    if report.state == "running":
        return _Status("running", "still running when the verifier's timeout ran out")
    if report.state == "killed":
        last = log.last_error_line
        return _Status("killed", f"killed without an exit status (SIGKILL or out of memory); last line: {last}")
    if report.state == "log":
        return _Status("log", None, cause=causes.of_saved_log(log))
    if report.state == "lost":
        return _Status("lost", f"lost: {report.reason}")
    if report.exit_code != 0:
        return _exited(report, log)
    return _Status("exited 0", None)


def _exited(report: WorkerReport, log: WorkerLog) -> _Status:
    """A worker that exited with a failure: its program's own error first, whatever its peers did."""
    code, status = report.exit_code, f"exited {report.exit_code}"
    error = log.own_error
    if error and code == ExitCode.PEER_LOST:
        # Its launcher's line would name only the peer it lost, which may have failed the same way.
        reason = f"{error}{causes.also_lost(report.reason)}"
    else:
        reason = log.failure_reason(exit_code=code, reason=report.reason)
        error = error if reason == error else None  # The launcher's or the trainer's line says more.
    where = log.waiting_at if code == ExitCode.STALLED else None
    if where:  # Each stalled worker dumped its program's stack: where it was waiting is the news.
        reason = f"{reason}; its program was waiting at {where}"
    cause = causes.of_exit(code, log, raised_own=error is not None)
    return _Status(status, f"{status}: {reason}", cause=cause, error=error)


def _without_metrics(log: WorkerLog) -> str:
    """A worker that reported no metrics, with why when its log says: a saved log has no exit status to."""
    if log.diagnosis:
        return f"no final metrics in its log: {log.diagnosis}"
    if log.exception:
        return f"no final metrics in its log, which ends in {one_line(log.exception)}"
    # Its last error line, if one says why: "no metrics" alone sends the reader to the log. Not just
    # the last line: a launcher's log ends with its own usage line, which says nothing.
    reason = log.reason_line
    return f"no final metrics in its log; last error line: {reason}" if reason else "no final metrics in its log"


def _differences(reporting: list[WorkerOutcome], tolerance: float) -> list[str]:
    differences = []
    keys = sorted({key for outcome in reporting for key in outcome.metrics} - IDENTITY_KEYS)
    for key in keys:
        lacking = [outcome.name for outcome in reporting if key not in outcome.metrics]
        if lacking:
            differences.append(f"{key} missing on {', '.join(lacking)}")
            continue
        values = [outcome.metrics[key] for outcome in reporting]
        if not all(_same(values[0], value, tolerance) for value in values[1:]):
            shown = _show(values)
            differences.append(
                f"{key} differs: " + " ".join(f"{o.name}={text}" for o, text in zip(reporting, shown, strict=False))
            )
    return differences


def _same(first, second, tolerance: float) -> bool:
    if isinstance(first, (int, float)) and isinstance(second, (int, float)):
        return math.isclose(first, second, rel_tol=0.0, abs_tol=tolerance)
    return first == second


def _show(values: list) -> list[str]:
    """Four decimals, like the tutorial; full precision when four decimals would hide the difference."""
    short = [f"{value:.4f}" if isinstance(value, float) else str(value) for value in values]
    if len(set(short)) > 1:
        return short
    return [repr(value) for value in values]

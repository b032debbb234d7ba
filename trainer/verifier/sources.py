"""Where worker reports come from: the results directory of a running cluster, or saved logs."""

import time
from pathlib import Path

from trainer.contract import shaping
from trainer.contract.resultsdir import WorkerFiles, WorkerRecord, wait_for_exit
from trainer.verifier.reasons import logged_reason, status_reason
from trainer.verifier.verdict import WorkerReport


def from_results_dir(
    directory: Path, names: list[str], *, timeout: float, start_timeout: float, clock=time.monotonic
) -> list[WorkerReport]:
    """Waits for every named worker to start (within `start_timeout` s) and exit (within `timeout` s)."""
    now = clock()
    return _wait_for_workers(directory, names, deadline=now + timeout, start_deadline=now + start_timeout, clock=clock)


def with_keeper(
    directory: Path, names: list[str], keeper: str, *, timeout: float, start_timeout: float, clock=time.monotonic
) -> tuple[list[WorkerReport], WorkerRecord]:
    """The keeper first: a worker that ended may yet be restarted, until the keeper itself has ended."""
    now = clock()
    deadline, start_deadline = now + timeout, now + start_timeout
    record = wait_for_exit(WorkerFiles(directory, keeper), deadline, clock, start_deadline=start_deadline)
    return _wait_for_workers(directory, names, deadline=deadline, start_deadline=start_deadline, clock=clock), record


def _wait_for_workers(directory: Path, names: list[str], *, deadline: float, start_deadline: float, clock):
    reports = []
    for name in names:
        record = wait_for_exit(WorkerFiles(directory, name), deadline, clock, start_deadline=start_deadline)
        reports.append(
            WorkerReport(
                name=record.name,
                state=record.state,
                exit_code=record.exit_code,
                log=record.log,
                reason=status_reason(record.details),
                # The launcher's record of its program's time and CPU; trainer/verifier/stragglers.py checks it.
                usage=record.details.get("usage"),
            )
        )
    return reports


def from_log_files(paths: list[Path], exit_codes: dict[str, int] | None = None) -> list[WorkerReport]:
    """Saved logs: each file is one worker, named by the file's stem; its exit status is unknown
    unless `exit_codes` gives it (trainer/verifier/given_exits.py), and then it is judged as a live
    run's worker is."""
    codes = exit_codes or {}
    reports = []
    for path in paths:
        log, code = path.read_text(errors="replace"), codes.get(path.stem)
        state = "exited" if path.stem in codes else "log"
        reports.append(
            WorkerReport(name=path.stem, state=state, exit_code=code, log=log, reason=logged_reason(log, code))
        )
    return reports


def lost(reasons: dict[str, str]) -> list[WorkerReport]:
    """Workers that left nothing to read, each with why (`--lost`): each fails the verdict."""
    return [WorkerReport(name=name, state="lost", exit_code=None, log="", reason=why) for name, why in reasons.items()]


def network_reports(directory: Path, names: list[str]) -> tuple[str, ...]:
    """One line per worker whose shaper reported (compose.network.yaml): its profile and measurements."""
    reports = ((name, shaping.read_report(str(directory), name)) for name in names)
    return tuple(f"{name}: {shaping.summary(report)}" for name, report in reports if report is not None)

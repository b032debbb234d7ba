"""What the keeper did (trainer/keeper/keeper.py): the restarts, and the step each one resumed from.

The keeper's log and the chief's are each read once into a record (trainer/verifier/worker_log.py),
which is what is judged here.
"""

import dataclasses

from trainer.contract.exitcodes import ExitCode
from trainer.contract.resultsdir import WorkerRecord
from trainer.verifier.events import events
from trainer.verifier.reasons import status_reason
from trainer.verifier.worker_log import read


@dataclasses.dataclass(frozen=True, kw_only=True)
class Restart:
    reason: str  # Which workers failed, and how.
    resumed_from_step: int | None  # None when the restarted run never said.


@dataclasses.dataclass(frozen=True, kw_only=True)
class Recovery:
    restarts: tuple[Restart, ...]
    limit: int | None
    problem: str | None  # Why the keeper did not end well, if it did not.

    def describe(self) -> str:
        if self.limit is None:
            return "restarts: unknown (the keeper left no record of them)"
        if not self.restarts:
            return f"restarts: none (limit {self.limit})"
        done = "; ".join(
            f"{number}: {restart.reason}, resumed from step "
            + ("?" if restart.resumed_from_step is None else str(restart.resumed_from_step))
            for number, restart in enumerate(self.restarts, 1)
        )
        return f"restarts: {len(self.restarts)} of at most {self.limit}: {done}"


def starting_steps(log: str) -> list[int]:
    """The step each run of a worker's trainer started from, in order (0: from scratch).

    Each run of this project's trainer prints `{"event": "start", "step": N}` where it starts
    (trainer/training/resume.py); a program that prints none has no steps to report. Only those
    events are read: the verdict reads the whole log once, on its own.
    """
    steps = (event.get("step") for event in events(log, "start"))
    return [step for step in steps if isinstance(step, int) and not isinstance(step, bool)]


def from_keeper(record: WorkerRecord, chief_log: str) -> Recovery:
    """The keeper's record, with the chief's log to say where each restarted run began."""
    starts = starting_steps(chief_log)
    reported = record.details.get("restarts", [])
    restarts = tuple(
        Restart(reason=entry.get("reason", "?"), resumed_from_step=starts[number] if number < len(starts) else None)
        for number, entry in enumerate(reported, 1)
    )
    problem = None
    if record.state == "missing":
        problem = "the keeper never started (see its container's log)"
    elif record.state == "running":
        problem = "the keeper was still running when the verifier's timeout ran out"
    elif record.state == "killed":
        problem = f"the keeper was killed without an exit status; last line: {read(record.log).last_error_line}"
    elif record.exit_code != ExitCode.OK:
        keeper = read(record.log)
        reason = keeper.failure_reason(exit_code=record.exit_code, reason=status_reason(record.details))
        problem = f"exited {record.exit_code}: {reason}"
    return Recovery(restarts=restarts, limit=record.details.get("limit"), problem=problem)

"""Why a worker, or the keeper, exited with a failure: the most structured account there is.

In order: the reason its status in the results directory gives (the launcher's, or the keeper's,
own words); else the trainer's `failed` event with that exit code (trainer/training/failure.py);
else, for saved logs and programs of the user's own, the last line that looks like a reason
(trainer/verifier/metrics.py).
"""

from trainer.verifier.events import events
from trainer.verifier.metrics import last_error_line


def status_reason(details: dict) -> str | None:
    """The `reason` a status in the results directory gives, if it gives one."""
    reason = details.get("reason")
    return reason.strip() if isinstance(reason, str) and reason.strip() else None


def failure_reason(*, exit_code: int | None, reason: str | None, log: str) -> str:
    """`reason` is the status's (`status_reason`); None for a saved log, or a status without one."""
    if reason:
        return reason
    failed = [
        event
        for event in events(log, "failed")
        # A restarted worker's log holds its earlier runs too: only a failure that ended this way counts.
        if event.get("exit_code") == exit_code and isinstance(event.get("reason"), str) and event["reason"]
    ]
    if failed:
        return failed[-1]["reason"]
    return last_error_line(log)

"""One worker's log, read once into the record every check of the verdict judges.

A worker's log holds what its launcher, its program and the observer printed. `read` goes through
its lines once, taking the JSON object on each (trainer/verifier/events.py), and keeps what the
checks ask of it: its events by kind; the final metrics its program printed
(trainer/verifier/metrics.py); the observer's sessions (trainer/verifier/observed.py); a known
failure's advice (trainer/verifier/diagnoses.py); the exception its program raised, the line that
says why it ended, its own error and whether only a lost peer made it fail
(trainer/verifier/reasons.py); and where a stalled program was waiting (trainer/verifier/stacks.py).
The verdict (trainer/verifier/verdict.py), the causes (trainer/verifier/causes.py) and the
keeper's account (trainer/verifier/recovery.py) judge this record: none of them reads the text again.
"""

import dataclasses
from collections.abc import Mapping

from trainer.verifier import reasons
from trainer.verifier.diagnoses import diagnose, unhealthy_peer
from trainer.verifier.events import by_kind, record
from trainer.verifier.metrics import final_metrics
from trainer.verifier.observed import Session, sessions_of
from trainer.verifier.stacks import waiting_in


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerLog:
    """What one worker's log says, as the checks ask it (`read`)."""

    events: Mapping[str, tuple[dict, ...]]  # Its JSON events by kind (`{"event": KIND, ...}`), each kind's in order.
    metrics: dict | None  # The final metrics its program printed (the last), or None.
    sessions: tuple[Session, ...]  # The observer's, in the order they began.
    diagnosis: str | None  # A known failure's advice, when the log shows one.
    exception: str | None  # The exception its last traceback ended with.
    reason_line: str | None  # The line that says why it ended, if one does.
    last_error_line: str  # The same, else its last line: never None.
    own_error: str | None  # The error its program raised of its own accord.
    caused_by_peer: bool  # Whether what it raised is TensorFlow's error for a peer that is gone.
    unhealthy_peer: str | None  # The peer TensorFlow found unhealthy, in one line.
    waiting_at: str | None  # Where its program's main thread was waiting, in its last stack dump.

    @property
    def connections(self) -> dict | None:
        """The launcher's last count of TensorFlow's connections (a restarted cluster's last run), or None."""
        found = self.events.get("connections", ())
        return found[-1] if found else None

    @property
    def failed(self) -> tuple[dict, ...]:
        """The `failed` events: the launcher's, where it ended the run, and the trainer's own."""
        return self.events.get("failed", ())

    def failure_reason(self, *, exit_code: int | None, reason: str | None) -> str:
        """Why it exited with `exit_code`, in one line (trainer/verifier/reasons.py, `failure_reason`).

        `reason`: its status's (`reasons.status_reason`); None for a saved log, or a status without one.
        """
        return reasons.failure_reason_from(
            exit_code=exit_code,
            reason=reason,
            advice=self.diagnosis,
            failed=self.failed,
            unhealthy=self.unhealthy_peer,
            last_error=self.last_error_line,
        )


def read(log: str) -> WorkerLog:
    """The record of one worker's log: its lines split once, and the JSON object on each read once."""
    lines = log.splitlines()
    records = [record(line) for line in lines]
    kinds = by_kind(records)
    diagnosis, exception, unhealthy = diagnose(log), reasons.exception_in(lines), unhealthy_peer(log)
    reason_line = reasons.reason_from(exception, lines, records)
    own_error = reasons.own_error_from(diagnosis, exception)
    return WorkerLog(
        events={kind: tuple(found) for kind, found in kinds.items()},
        metrics=final_metrics(kinds.get("final", []), lines),
        sessions=tuple(sessions_of(kinds.get("observed", []))),
        diagnosis=diagnosis,
        exception=exception,
        reason_line=reason_line,
        last_error_line=reasons.last_error_from(reason_line, lines, records),
        own_error=own_error,
        caused_by_peer=reasons.caused_by_peer_from(own_error, exception, unhealthy),
        unhealthy_peer=unhealthy,
        waiting_at=waiting_in(lines),
    )

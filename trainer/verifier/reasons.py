"""Why a worker, or the keeper, exited with a failure: the most structured account there is, in one line.

In order: the advice for a failure the log shows and trainer/verifier/diagnoses.py knows (it names
the fix, which no line of the log does); the reason its status in the results directory gives
(the launcher's, or the keeper's, own words; for a saved log, the same line, read from the
`failed` event printed with it: `logged_reason`); else the trainer's `failed` event with that exit code
(trainer/training/failure.py); else the peer TensorFlow's coordination service found unhealthy, if
the log shows one (trainer/verifier/diagnoses.py); else, for programs of the user's own, the line
of the log most likely to say why (`last_error_line`).

Whatever comes from a program's log is shown as one line of at most `LIMIT` characters: its first
line, so that an error message that goes on to print tensors, or a whole report, shows only what
it says first. A status's reason is the harness's own line (the launcher's, the keeper's, or a
config error of this project's trainer), shown whole: cutting it could hide which peers were lost.

Which failure started it (trainer/verifier/causes.py orders the verdict's problems by it) is read
from exit codes first; from a log, only what a program raised: `own_error`, its error of its own
accord, and `caused_by_peer`, whether what it raised is what TensorFlow raises when a peer is gone.

The functions that judge a log's text each have a counterpart over what was read from it: `..._in`
over its lines, `..._from` over what the others found. With those, a worker's log is read once into
the record the verdict judges (trainer/verifier/worker_log.py); the functions over text are for a
log read on its own.
"""

import re
from collections.abc import Iterable, Sequence

from trainer.verifier.diagnoses import diagnose, unhealthy_peer
from trainer.verifier.events import events, record

# Long enough for an error message's first sentence; short enough for one line of a verdict.
LIMIT = 200

_TRACEBACK = "Traceback (most recent call last):"
# The line a traceback ends with: the exception's (qualified) class name, then its message.
_EXCEPTION = re.compile(r"^\w+(\.\w+)*(Error|Exception)(: |$)")
# What TensorFlow raises in a worker whose peer is gone: its collectives aborted or cancelled, its
# connections refused or cut, its coordination service's heartbeats stopped. The peer's doing, not
# the program's: by its class, or, whatever the class, by these words of its message.
_PEER_EXCEPTION = re.compile(r"^(\w+\.)*(UnavailableError|CancelledError|AbortedError|DeadlineExceededError)(: |$)")
_PEER_WORDS = re.compile(
    r"Collective ops is aborted|tasks are unhealthy|heartbeat|socket closed|failed to connect|connection reset",
    re.IGNORECASE,
)
# The launcher's lost-peer lines end in the peers it lost, each with why (trainer/launcher/postmortem.py:
# `training program exited 1 after losing peer(s): LISTING`; trainer/launcher/watchdog.py: `stopped:
# lost peer(s) LISTING`). Read only to show them again, never to decide anything: the exit code does.
_LOST_PEERS = re.compile(r"(?:after losing peer\(s\):|lost peer\(s\)) (.+)$")
# Words of the lines that say why a worker ended: errors, and the launcher's closing reasons.
_REASON = re.compile(
    r"error|exception|failed|fatal|killed|stopped|exited|never joined|mismatch|deadline", re.IGNORECASE
)


def one_line(text: str, limit: int | None = LIMIT) -> str:
    """The first line of `text` that is not blank, stripped, and cut to `limit` characters with an ellipsis."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if limit is None or len(first) <= limit else first[: limit - 1].rstrip() + "…"


def status_reason(details: dict) -> str | None:
    """The `reason` a status in the results directory gives, if it gives one."""
    reason = details.get("reason")
    return one_line(reason, limit=None) if isinstance(reason, str) and reason.strip() else None


def logged_reason(log: str, exit_code: int | None) -> str | None:
    """For a saved log, the reason a status would give: that of the last `failed` event with its exit code.

    The launcher prints one when it ends the run, with the line its status records; the trainer, when
    it fails of its own accord (trainer.contract.console).
    """
    reason = failed_event_reason(events(log, "failed"), exit_code)
    return one_line(reason, limit=None) if reason else None


def failure_reason(*, exit_code: int | None, reason: str | None, log: str) -> str:
    """`reason` is the status's (`status_reason`); None for a saved log, or a status without one."""
    return failure_reason_from(
        exit_code=exit_code,
        reason=reason,
        advice=diagnose(log),
        failed=events(log, "failed"),
        unhealthy=unhealthy_peer(log),
        last_error=last_error_line(log),
    )


def failure_reason_from(
    *,
    exit_code: int | None,
    reason: str | None,
    advice: str | None,
    failed: Iterable[dict],
    unhealthy: str | None,
    last_error: str,
) -> str:
    """`failure_reason`, from what was read from the log: its known failure's `advice`, its `failed`
    events, the `unhealthy` peer it names and its `last_error` line (`last_error_line`)."""
    if advice:
        return advice
    if reason:
        return reason
    failed_reason = failed_event_reason(failed, exit_code)
    if failed_reason:
        return one_line(failed_reason)
    if unhealthy:
        return unhealthy
    return last_error


def failed_event_reason(failed: Iterable[dict], exit_code: int | None) -> str | None:
    """The reason of the last of the `failed` events with this exit code, if there is one."""
    failed = [
        event
        for event in failed
        # A restarted worker's log holds its earlier runs too: only a failure that ended this way counts.
        if event.get("exit_code") == exit_code and isinstance(event.get("reason"), str) and event["reason"].strip()
    ]
    return failed[-1]["reason"] if failed and exit_code is not None else None


def exception_line(log: str) -> str | None:
    """The exception the last traceback in `log` ended with (`ValueError: ...`), or None without one.

    Only the first line of the exception's message: whatever it prints after that (tensors, for
    one) follows on lines of its own.
    """
    return exception_in(log.splitlines())


def exception_in(lines: Iterable[str]) -> str | None:
    """`exception_line`, from the log's lines."""
    lines = [line.strip() for line in lines]
    if _TRACEBACK not in lines:
        return None
    start = len(lines) - lines[::-1].index(_TRACEBACK)
    found = [line for line in lines[start:] if _EXCEPTION.match(line)]
    return found[-1] if found else None


def last_error_line(log: str) -> str:
    """The line most likely to say why a worker failed, as one line of at most `LIMIT` characters.

    The last resort (`failure_reason`), for logs that say why only in prose: the exception of the
    last traceback, if there is one, over any later line (the launcher's own closing lines, say);
    else the last line that looks like a reason; else the last line. A JSON event is never taken
    for prose: `"event": "failed"` would match the words, and such an event is read whole where it
    counts.
    """
    lines = log.splitlines()
    records = [record(line) for line in lines]
    return last_error_from(reason_from(exception_in(lines), lines, records), lines, records)


def last_error_from(reason: str | None, lines: Sequence[str], records: Sequence[dict | None]) -> str:
    """`last_error_line`, from the log's `reason_line`, its lines, and the JSON object on each (`record`)."""
    if reason:
        return reason
    # The observer's records (trainer/verifier/observed.py) are data the launcher adds at the end: never the last word.
    kept = [
        line.strip()
        for line, found in zip(lines, records, strict=True)
        if line.strip() and not (found is not None and found.get("event") == "observed")
    ]
    return one_line(kept[-1]) if kept else "(no output)"


def reason_line(log: str) -> str | None:
    """`last_error_line` without its last resort: None when no line says why (a log that ends well)."""
    lines = log.splitlines()
    return reason_from(exception_in(lines), lines, [record(line) for line in lines])


def reason_from(exception: str | None, lines: Sequence[str], records: Sequence[dict | None]) -> str | None:
    """`reason_line`, from the log's `exception_line`, its lines, and the JSON object on each (`record`)."""
    if exception:
        return one_line(exception)
    for line, found in zip(reversed(lines), reversed(records), strict=True):
        # A JSON event (an object with an `event` field) is never taken for prose.
        if not (found is not None and "event" in found) and _REASON.search(line):
            return one_line(line)
    return None


def is_exception(line: str) -> bool:
    """Whether `line` is an exception's (`ValueError: ...`), as a traceback ends with."""
    return bool(_EXCEPTION.match(line))


def own_error(log: str) -> str | None:
    """The error a worker's program raised of its own accord, as one line, or None when it raised none.

    A known failure's advice (trainer/verifier/diagnoses.py), else the exception of its last
    traceback, unless that exception is what TensorFlow raises when a peer is gone (`caused_by_peer`):
    then the program only failed with its peer, and its own line is the peer's.
    """
    return own_error_from(diagnose(log), exception_line(log))


def own_error_from(advice: str | None, exception: str | None) -> str | None:
    """`own_error`, from the log's known failure's `advice` (`diagnose`) and its `exception_line`."""
    if advice:
        return advice
    if exception is None or _is_peer_exception(exception):
        return None
    return one_line(exception)


def caused_by_peer(log: str) -> bool:
    """Whether what the program raised is TensorFlow's error for a peer that is gone, by the log alone.

    For a program's own exit code (1 for an uncaught exception), which says nothing of peers; an exit
    code of the launcher's (a lost peer is 5) says it better.
    """
    return caused_by_peer_from(own_error(log), exception_line(log), unhealthy_peer(log))


def caused_by_peer_from(own: str | None, exception: str | None, unhealthy: str | None) -> bool:
    """`caused_by_peer`, from the log's `own_error`, its `exception_line` and its `unhealthy_peer`."""
    if own is not None:
        return False
    return (exception is not None and _is_peer_exception(exception)) or unhealthy is not None


def _is_peer_exception(exception: str) -> bool:
    return bool(_PEER_EXCEPTION.match(exception) or _PEER_WORDS.search(exception))


def lost_peers(reason: str) -> str | None:
    """The peers a launcher's lost-peer line names, each with why (`worker-1:12345 (exited 1)`), or None."""
    found = _LOST_PEERS.search(reason)
    return found[1] if found else None

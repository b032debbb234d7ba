"""What every role prints: a line on stdout (and in the results log), the one config-error line,
and the event that says why a worker failed.

A configuration error is always one line on stderr, `PROGRAM: config error: REASON`, with the
offending value quoted in REASON, and exit code 2 (trainer.contract.exitcodes); with a results
directory it is also the worker's last log line and its status's reason, for the verifier.

A failure the trainer or the launcher decides is also printed as data, `{"event": "failed",
"exit_code": N, "reason": LINE}`, so that a saved log, which has no status, says why as a live run's
status does (trainer/verifier/reasons.py).
"""

import json
import sys
from typing import Protocol

from trainer.contract.exitcodes import ExitCode


class Log(Protocol):
    """Where a line goes besides stdout: the results directory's recorder (trainer.contract.resultsdir)."""

    def log_line(self, line: str) -> None: ...

    def finish(self, exit_code: int, **details) -> None: ...


def show(text: str, recorder: Log | None = None) -> None:
    """A line on stdout (for `docker logs`) and, when there is a results directory, in the log there."""
    sys.stdout.write(text)
    sys.stdout.flush()
    if recorder:
        recorder.log_line(text)


def failed_event(exit_code: int, reason: str) -> str:
    """The failure as data: its exit code, and the line printed for people."""
    return json.dumps({"event": "failed", "exit_code": int(exit_code), "reason": reason})


def config_error(program: str, reason: str, recorder: Log | None = None) -> int:
    """One line on stderr (and in the results, for the verifier), and the config-error exit code."""
    message = f"{program}: config error: {reason}"
    print(message, file=sys.stderr, flush=True)
    if recorder:
        recorder.log_line(message + "\n")
        recorder.finish(ExitCode.CONFIG_ERROR, reason=message)
    return ExitCode.CONFIG_ERROR

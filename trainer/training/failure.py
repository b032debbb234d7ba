"""How the trainer ends on a failure of its own: a line on stderr for people, a JSON event for programs.

Its own failures are a configuration error (exit 2, the resume mismatch included), a failed
check of its result (exit 3) and a checkpoint its volume had no room for (exit 12). The line is
the one every role prints (trainer.contract.console); the event, `{"event": "failed",
"exit_code": N, "reason": LINE}` on stdout, is what the verifier reads (trainer/verifier/reasons.py)
when the launcher's status gives no reason of its own.
"""

import sys

from trainer.contract.console import config_error, failed_event, show
from trainer.contract.exitcodes import ExitCode


class FailedEvent:
    """The trainer's side of console's `Log`, so that a config error is printed the one way there is.

    The launcher, not the trainer, keeps the results directory, and it records whatever the
    trainer prints: the line needs no second copy, and the reason a recorder would write to the
    status is printed as the event instead.
    """

    def log_line(self, line: str) -> None:
        pass  # Already on stderr, which the launcher records.

    def finish(self, exit_code: int, **details) -> None:
        _print_event(exit_code, details["reason"])


def configuration_failed(reason: str) -> int:
    return config_error("trainer", reason, FailedEvent())


def check_failed(reason: str) -> int:
    message = f"trainer: training check failed: {reason}"
    print(message, file=sys.stderr, flush=True)
    _print_event(ExitCode.TRAINING_CHECK_FAILED, message)
    return ExitCode.TRAINING_CHECK_FAILED


def volume_full(reason: str) -> int:
    message = f"trainer: {reason}"
    print(message, file=sys.stderr, flush=True)
    _print_event(ExitCode.VOLUME_FULL, message)
    return ExitCode.VOLUME_FULL


def _print_event(exit_code: int, reason: str) -> None:
    show(failed_event(exit_code, reason) + "\n")

"""What the set-up says: a line per step for people (`setup | ...`), and the one line of an error
that is the user's to fix (`setup: ...`, exit 2)."""

import sys

from trainer.contract.exitcodes import ExitCode


class SetupError(Exception):
    """Something the user must fix (Docker not running, a requirement that conflicts with the pins):
    its message is the one line to print, and the set-up exits CONFIG_ERROR."""

    status = ExitCode.CONFIG_ERROR


def say(line: str) -> None:
    print(f"setup | {line}", file=sys.stderr, flush=True)

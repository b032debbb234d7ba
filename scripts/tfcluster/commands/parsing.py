"""The argument parser of the host's Python commands (tfcluster/commands/: run, workers, nodes, ...).

It is argparse, with the project's rules for a command line: a mistake is one line on stderr,
`NAME: REASON`, naming the bad argument or value (and the likely intended one, when one is
close), with exit status 2; no abbreviated options, so that a typo is never silently taken for a
real option; and help text laid out as written, so that examples and exit codes keep their lines.
Host only, standard library only: `scripts/run` must work with nothing installed but python3.
"""

import argparse
import re
import sys
from collections.abc import Callable
from typing import NoReturn

from tfcluster.errors import OPTION_CUTOFF, VALUE_CUTOFF, suggestion  # noqa: F401 (the parser's, re-exported)
from trainer.contract.exitcodes import ExitCode

# Every program's one set of exit codes: a bad argument is a config error.
BAD_ARGUMENTS = ExitCode.CONFIG_ERROR

# Help is laid out for this width whatever the terminal's, as the hand-written examples and exit
# codes of each command are, so that it reads the same everywhere, docs/commands.md included.
HELP_WIDTH = 100


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high`, written in digits."""

    def convert(text: str) -> int:
        # Digits only: int() would also take ' 3', '3_0' and '٣'.
        if not re.fullmatch(r"[0-9]+", text) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}, got {text!r}")
        return int(text)

    return convert


def one_of(*choices: str) -> Callable[[str], str]:
    """An argparse type: one of `choices`, with the closest suggested for a near miss.

    Used instead of argparse's `choices=`, whose message can neither suggest nor be reworded.
    """

    def convert(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(
                f"{text!r} must be one of {', '.join(choices)}{suggestion(text, choices, VALUE_CUTOFF)}"
            )
        return text

    return convert


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Description and epilog as written; options wrapped at HELP_WIDTH."""

    def __init__(self, prog: str):
        super().__init__(prog, width=HELP_WIDTH, max_help_position=24)


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose every complaint is one line and exit status 2.

    `name` starts each complaint (`run: ...`); `value_names` says what an option that came
    without its value needs (`{"--workers": "a number"}` gives `run: --workers needs a number`).
    """

    def __init__(self, name: str, *, value_names: dict[str, str] | None = None, **options):
        super().__init__(
            allow_abbrev=False,
            # The errors come back as exceptions, which say which option was wrong and why.
            exit_on_error=False,
            formatter_class=HelpFormatter,
            **options,
        )
        self.name = name
        self.value_names = value_names or {}

    def parse_args(self, args=None, namespace=None):
        try:
            namespace, unknown = self.parse_known_args(args, namespace)
        except argparse.ArgumentError as error:
            self.fail(self._explain(error))
        if unknown:
            # The first is named: with `--worker 3`, the 3 is unknown only because --worker is.
            self.fail(self._unknown(unknown[0]))
        return namespace

    def error(self, message: str) -> NoReturn:
        # What argparse still reports through here rather than by an exception: chiefly a missing
        # positional argument, in argparse's wording since Python 3.2.
        missing = message.removeprefix("the following arguments are required: ")
        if missing != message:
            message = f"{missing} is missing"
        self.fail(f"{message} (usage: {self.short_usage()})")

    def fail(self, message: str) -> NoReturn:
        print(f"{self.name}: {message}", file=sys.stderr)
        sys.exit(BAD_ARGUMENTS)

    def short_usage(self) -> str:
        """The usage line without its `usage: ` and on one line, however wide the terminal."""
        return " ".join(self.format_usage().split()[1:])

    def option_strings(self) -> list[str]:
        return [option for action in self._actions for option in action.option_strings]

    def _explain(self, error: argparse.ArgumentError) -> str:
        # argparse names an option by all its spellings (`--output/-o`); the first is enough.
        option = (error.argument_name or "").split("/")[0]
        # argparse's own wording, which it has kept since Python 3.2, reworded as the project's.
        if error.message == "expected one argument":
            return f"{option} needs {self.value_names.get(option, 'a value')}"
        if error.message.startswith("ignored explicit argument "):
            return f"{option} takes no value, got {error.message.removeprefix('ignored explicit argument ')}"
        return f"{option} {error.message}" if option else error.message

    def _unknown(self, argument: str) -> str:
        if argument.startswith("-"):
            hint = suggestion(argument.split("=", 1)[0], self.option_strings())
            if hint:
                return f"unknown argument {argument!r}{hint}"
        return f"unknown argument {argument!r} (usage: {self.short_usage()})"

"""Bad input, refused before anything starts: one line that names the bad value and says why, and
the likely intended value when one is close."""

import difflib
from collections.abc import Iterable


class Refusal(Exception):
    """Bad input: the one line that says what and why (a command prefixes it with its name, `run: `)."""


# How close a mistyped word must be to a real one to be suggested (difflib's ratio): for an
# option, `--worker` against `--workers` is 0.94 and `--bogus` against any of run's at most 0.5;
# a value is a shorter word, where one slip weighs more (`wna` against `wan` is 0.67).
OPTION_CUTOFF = 0.7
VALUE_CUTOFF = 0.6


def suggestion(word: str, candidates: Iterable[str], cutoff: float = OPTION_CUTOFF) -> str:
    """` (did you mean X?)` for the candidate closest to `word`, or nothing if none is close."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=cutoff)
    return f" (did you mean {close[0]}?)" if close else ""

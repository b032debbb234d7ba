"""Reads a worker's final metrics from its log, in either of the two forms a trainer may print.

- One JSON object per line with `"event": "final"` (this project's trainer, full precision).
- The tutorial's line of `key=value` pairs: `worker=0 replicas=2 initial_loss=0.7459 ...`, so the
  tutorial's own program can be verified unchanged.

The last final-metrics line in the log wins; a JSON line beats a `key=value` line.
"""

import re

from trainer.verifier.events import events, is_event

# Keys that identify the worker rather than describe the training: never compared.
IDENTITY_KEYS = frozenset({"event", "worker", "hostname"})

_PAIR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\S+)$")


def parse_final_metrics(log: str) -> dict[str, float | int | str] | None:
    finals = events(log, "final")
    if finals:
        return finals[-1]
    pair_metrics = None
    for line in log.splitlines():
        line = line.strip()
        if not line.startswith("{") and "=" in line:
            pairs = _pairs(line)
            if pairs is not None:
                pair_metrics = pairs
    return pair_metrics


def _pairs(line: str) -> dict | None:
    """A line made only of `key=value` tokens that names the worker and its replicas."""
    pairs = {}
    for token in line.split():
        match = _PAIR.match(token)
        if not match:
            return None
        pairs[match.group(1)] = _number(match.group(2))
    return pairs if {"worker", "replicas"} <= pairs.keys() else None


def _number(text: str) -> float | int | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


# Words of the lines that say why a worker ended: errors, and the launcher's closing reasons.
_REASON = re.compile(
    r"error|exception|failed|fatal|killed|stopped|exited|never joined|mismatch|deadline", re.IGNORECASE
)


def last_error_line(log: str) -> str:
    """The line most likely to say why a worker failed: the last that looks like a reason.

    The last resort (trainer/verifier/reasons.py), for logs that say why only in prose. A JSON
    event is never taken for prose: `"event": "failed"` would match the words, and such an event
    is read whole where it counts.
    """
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        if _REASON.search(line) and not is_event(line):
            return line
    return lines[-1] if lines else "(no output)"

"""Reads a worker's final metrics from its log, in either of the two forms a trainer may print.

- One JSON object per line with `"event": "final"` (this project's trainer, full precision).
- The tutorial's line of `key=value` pairs: `worker=0 replicas=2 initial_loss=0.7459 ...`, so the
  tutorial's own program can be verified unchanged.

The last final-metrics line in the log wins; a JSON line beats a `key=value` line.
"""

import re
from collections.abc import Iterable, Sequence

from trainer.verifier.events import events

# Keys that identify the worker rather than describe the training: never compared.
IDENTITY_KEYS = frozenset({"event", "worker", "hostname"})

_PAIR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\S+)$")


def parse_final_metrics(log: str) -> dict[str, float | int | str] | None:
    return final_metrics(events(log, "final"), log.splitlines())


def final_metrics(finals: Sequence[dict], lines: Iterable[str]) -> dict[str, float | int | str] | None:
    """`parse_final_metrics`, from the log's `final` events and its lines."""
    if finals:
        return finals[-1]
    pair_metrics = None
    for line in lines:
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

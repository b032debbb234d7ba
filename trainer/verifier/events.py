"""The JSON event lines a trainer prints, `{"event": KIND, ...}`, read back from its log.

This project's trainer prints one where each run starts (`start`), where it fails of its own
accord (`failed`), and its final metrics (`final`) (trainer/training/output.py); the launcher adds
its count of TensorFlow's connections (`connections`) and the observer's records (`observed`). Any
other line, prose or JSON of another shape, is no event. A worker's log is read once, its events
grouped by kind (`by_kind`), into the record the verdict judges (trainer/verifier/worker_log.py).
"""

import json
from collections.abc import Iterable


def record(line: str) -> dict | None:
    """The JSON object on `line`, or None when the line holds none."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def by_kind(records: Iterable[dict | None]) -> dict[str, list[dict]]:
    """The events among `records` (each line's, `record`), by kind, each kind's in order."""
    found: dict[str, list[dict]] = {}
    for event in records:
        if event is not None and isinstance(event.get("event"), str):
            found.setdefault(event["event"], []).append(event)
    return found


def events(log: str, kind: str) -> list[dict]:
    """Every event of `kind` in the log, in order."""
    found = (record(line) for line in log.splitlines())
    return [event for event in found if event is not None and event.get("event") == kind]

"""The JSON event lines a trainer prints, `{"event": KIND, ...}`, read back from its log.

This project's trainer prints one where each run starts (`start`), where it fails of its own
accord (`failed`), and its final metrics (`final`) (trainer/training/output.py). Any other line,
prose or JSON of another shape, is no event.
"""

import json


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


def events(log: str, kind: str) -> list[dict]:
    """Every event of `kind` in the log, in order."""
    found = (record(line) for line in log.splitlines())
    return [event for event in found if event is not None and event.get("event") == kind]


def is_event(line: str) -> bool:
    found = record(line)
    return found is not None and "event" in found

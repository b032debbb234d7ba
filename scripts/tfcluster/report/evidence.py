"""What a run's report shows, as data: read from what the run left (its verdict record, each
worker's log with the engine's timestamps, each container's state), never judged again.

Each worker's log is read for what the launcher, the observer and this project's trainer already
print as data or as fixed words: the rendezvous (`waiting for N peer(s)`, `all N workers agree`),
the observer's records (`{"event": "observed", ...}`: the model state at each epoch, checkpoint and
the end, `Model.fit`'s epoch metrics), the trainer's epoch lines and its `start`, `final` and
`failed` records. A program that prints none of them still has its container's start and end, its
rendezvous, its observed states and the verdict.
"""

import json
import re
import time
from datetime import datetime

# The launcher's lines around the rendezvous (trainer/launcher/barrier.py's wording).
_WAITING = re.compile(r"launcher \| \S+: waiting for \d+ peer")
_AGREED = re.compile(r"launcher \| \S+: all \d+ workers agree")
# This project's trainer's epoch line (trainer/training/output.py, `epoch_line`).
_EPOCH = re.compile(
    r"^train \| epoch: +(?P<epoch>\d+)/\d+ *\| step: +(?P<step>\d+) "
    r"\| loss: (?P<loss>\S+) \| accuracy: (?P<accuracy>\S+)"
)
_CHECKPOINT = re.compile(r"^checkpoint \| (?P<what>.+)")


def timed_lines(text: str) -> list[tuple[float | None, str]]:
    """A log as `docker logs --timestamps` gives it: each line's time (seconds since the epoch) and text.
    A line without the engine's time (a saved log of another kind) has None."""
    found = []
    for line in text.splitlines():
        stamp, _, rest = line.partition(" ")
        when = engine_time(stamp)
        found.append((when, rest) if when is not None else (None, line))
    return found


def engine_time(stamp: str) -> float | None:
    """The engine's RFC 3339 time with nanoseconds (`2026-12-06T13:00:00.123456789Z`), in seconds."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", stamp)
    if not match:
        return None
    whole, fraction, zone = match.groups()
    moment = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone))
    return moment.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)


def stamp(seconds: float) -> str:
    """`seconds` since the epoch as the engine writes a log line's time (what `engine_time` reads)."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((seconds - whole) * 1e9):09d}Z"


def worker(name: str, text: str, container: dict | None) -> dict:
    """One worker's phases (each launcher's run: start-up, rendezvous, training), its marks (epochs,
    checkpoints, observed states, restarts, failures), its epochs' metrics and its container."""
    sessions, marks, epochs, states = [], [], [], []
    session, last = None, None
    for when, line in timed_lines(text):
        record = _record(line)
        if record is not None and record["event"] == "observed" and isinstance(record.get("time"), (int, float)):
            when = record["time"]  # The observer's own clock, at the moment it recorded.
        if when is None:
            continue
        last, waiting = when, _WAITING.search(line)
        if session is None or (waiting and session["rendezvous"] is not None):
            if session is not None:  # A launcher's second rendezvous: the keeper started it again.
                _close(session, when)
                marks.append({"t": when, "kind": "restart", "label": "launched again"})
            session = {"started": when, "rendezvous": None, "agreed": None, "strategy": None, "ended": None}
            sessions.append(session)
        if waiting:
            session["rendezvous"] = when
        elif _AGREED.search(line):
            session["agreed"] = when
        elif record is not None:
            _on_record(record, when, marks, epochs, states, session)
        else:
            _on_line(line, when, marks, epochs)
    if session is not None:
        _close(session, last)
    return {
        "name": name,
        "phases": [phase for run in sessions for phase in _phases(run)],
        "marks": marks,
        "epochs": epochs,
        "states": states,
        "container": container or {},
    }


def _record(line: str) -> dict | None:
    if not line.startswith("{"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) and "event" in record else None


def _on_record(record: dict, when: float, marks: list, epochs: list, states: list, session: dict) -> None:
    event = record["event"]
    if event == "observed" and record.get("kind") == "strategy" and session["strategy"] is None:
        session["strategy"] = when  # The program made its strategy: TensorFlow imported, the cluster joined.
    elif event == "observed" and record.get("kind") == "state":
        state = {key: record.get(key) for key in ("point", "index", "step")} | {"t": when}
        if isinstance(record.get("variables"), list):
            state["variables"] = len(record["variables"])  # How many it fingerprinted there, for the table.
        states.append(state)
        if record.get("point") == "epoch" and record.get("logs"):
            epochs.append({"epoch": record.get("index"), "step": record.get("step"), "t": when, **record["logs"]})
    elif event == "start" and record.get("step"):
        marks.append({"t": when, "kind": "resumed", "label": f"resumed from step {record['step']}"})
    elif event in ("final", "failed"):
        session["ended"] = when
        if event == "failed":
            marks.append({"t": when, "kind": "failed", "label": str(record.get("reason", "failed"))[:200]})


def _on_line(line: str, when: float, marks: list, epochs: list) -> None:
    epoch = _EPOCH.match(line)
    if epoch:
        figures = {key: float(epoch[key]) for key in ("loss", "accuracy")}
        epochs.append({"epoch": int(epoch["epoch"]), "step": int(epoch["step"]), "t": when, **figures})
        marks.append({"t": when, "kind": "epoch", "label": f"epoch {epoch['epoch']}"})
        return
    checkpoint = _CHECKPOINT.match(line)
    if checkpoint:
        marks.append({"t": when, "kind": "checkpoint", "label": checkpoint["what"][:120]})


def _close(session: dict, when: float) -> None:
    if session["ended"] is None:
        session["ended"] = when


def _phases(session: dict) -> list[dict]:
    """Start-up until the rendezvous began, the rendezvous until the workers agreed, the program's
    import until it made its strategy (where the observer saw it), then training."""
    started, rendezvous, agreed, ended = (session[key] for key in ("started", "rendezvous", "agreed", "ended"))
    phases = []
    if rendezvous is not None and rendezvous > started:
        phases.append({"phase": "start-up", "from": started, "to": rendezvous})
    if rendezvous is not None:
        phases.append({"phase": "rendezvous", "from": rendezvous, "to": agreed if agreed is not None else ended})
    program = agreed if agreed is not None else (started if rendezvous is None else None)
    if program is None:
        return phases
    strategy = session["strategy"]
    if strategy is not None and program <= strategy <= ended:
        phases.append({"phase": "import", "from": program, "to": strategy})
        program = strategy
    phases.append({"phase": "training", "from": program, "to": max(ended, program)})
    return phases

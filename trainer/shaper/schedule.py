"""A worker's network faults, applied when its training reaches them (trainer/contract/faults.py).

The shaper runs this beside its worker once its links are measured. It reads the training's
progress from the file the observer in the worker's program keeps (trainer/observer/progress.py),
cuts the worker off when a fault's step, epoch or time comes, heals it the fault's seconds later,
and records each fault in the results directory (`faults-<worker>.json`, rewritten whole) for the
verifier: what it was, when it was cut and healed, and the step and epoch it hit. A fault the
training never reached (the worker ended first) is recorded as such.
"""

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from trainer.contract.faults import Fault

POLL = 0.05  # Seconds between reads of the progress file: well under its own interval.


def reached(fault: Fault, progress: dict, now: float) -> bool:
    """Whether the training, as `progress` gives it, has come to `fault`."""
    steps, epochs, first = progress.get("steps", 0), progress.get("epochs", 0), progress.get("first_step")
    if fault.trigger == "step":
        return steps >= fault.at
    if fault.trigger == "epoch":
        return steps >= 1 and epochs >= fault.at - 1  # Epoch N begins once N - 1 have ended.
    return first is not None and now >= first + fault.at


def read_progress(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # Not yet written (or being replaced): no progress yet.


def run(
    faults: list[Fault],
    *,
    progress: Path,
    record: Path,
    cut: Callable[[str], object],
    heal: Callable[[], object],
    ended: threading.Event,
    say: Callable[[str], None],
) -> list[dict]:
    """Each fault in turn, until the last or the worker's end (`ended`); what it did, as recorded."""
    done: list[dict] = []
    _go_through(faults, done, progress=progress, record=record, cut=cut, heal=heal, ended=ended, say=say)
    return done


def _go_through(faults, done: list[dict], *, progress, record, cut, heal, ended, say) -> None:
    for fault in faults:
        entry = {"fault": fault.describe(), "worker": fault.worker, "way": fault.way, "seconds": fault.seconds}
        entry |= {"trigger": fault.trigger, "at": fault.at}
        while not reached(fault, state := read_progress(progress), time.time()):
            if ended.wait(POLL):
                done.append(entry | {"reached": False})
                _write(record, done)
                say(f"{fault.worker}: its training ended before {fault.when()}: not cut")
                return
        cut(fault.way)
        entry |= {
            "reached": True,
            "cut_at": time.time(),
            "step": state.get("steps"),
            "epoch": state.get("epochs", 0) + 1,
        }
        done.append(entry)
        _write(record, done)
        say(f"{fault.describe()}: cut at step {entry['step']}")
        ended.wait(fault.seconds)
        heal()
        entry["healed_at"] = time.time()
        _write(record, done)
        say(f"{fault.worker}: healed after {entry['healed_at'] - entry['cut_at']:.1f}s")


def _write(path: Path, entries: list[dict]) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(entries), encoding="utf-8")
    os.replace(temporary, path)

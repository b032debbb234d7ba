"""A worker's network faults, applied when its training reaches them (trainer/contract/faults.py).

The shaper runs this beside its worker once its links are measured. It reads the training's
progress from the file the observer in the worker's program keeps (trainer/observer/progress.py),
injects a fault when its step, epoch or time comes (cuts the worker off, or gives a link another
profile), undoes it the fault's seconds later (heals the cut, gives the link its own back), and
records each fault in the results directory (`faults-<worker>.json`, rewritten whole) for the
verifier: what it was, when it was cut and healed, the step and epoch it hit, and the training's
step time before, during and after it (as long as the cut, up to PACE_WINDOW, each: the next
fault is looked for after that). Every fault is in the record before the worker trains, as not
reached until it is (`plan`): one the training never reached (the worker ended first) stays so.
"""

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from trainer.contract.faults import WORDS, Fault

POLL = 0.05  # Seconds between reads of the progress file: well under its own interval.
PACE_WINDOW = 10.0  # The longest stretch of training before and after a cut whose step time is given.


def reached(fault: Fault, progress: dict, now: float) -> bool:
    """Whether the training, as `progress` gives it, has come to `fault`."""
    steps, epochs, first = progress.get("steps", 0), progress.get("epochs", 0), progress.get("first_step")
    if fault.trigger == "step":
        return steps >= fault.at
    if fault.trigger == "epoch":
        # Epoch N begins with the first step after N - 1 have ended: after what their ends do
        # (a checkpoint's save, in a collective of its own), so a cut lands in training's steps.
        return epochs >= fault.at - 1 and steps > progress.get("epoch_step", 0)
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
    inject: Callable[[Fault], object],
    undo: Callable[[Fault], object],
    ended: threading.Event,
    say: Callable[[str], None],
    worker: str,
) -> list[dict]:
    """Each fault in turn, until the last or the worker's end (`ended`); what it did, as recorded.

    A fault is injected once a run, however often the keeper restarts the cluster: a shaper started
    again keeps the faults its predecessor reached (the first ones, in order) and goes on from there.
    """
    done = plan(faults, record)
    if done:
        say(f"{worker}: {len(done)} fault(s) injected before the restart: not again")
    act = {"inject": inject, "undo": undo, "say": say, "worker": worker}
    _go_through(faults[len(done) :], done, progress=progress, record=record, ended=ended, **act)
    return done


def plan(faults: list[Fault], record: Path) -> list[dict]:
    """Every fault of this run in the record before the worker trains, and the ones a predecessor
    reached (returned) as it left them: the verifier reads the record as soon as the worker has
    ended, which may be before this shaper's last word, and must find every fault there, the ones
    never reached said to be (a missing one would be a fault asked for and silently untested).

    The shaper writes it before its report, which the worker's launcher waits for; `run` writes it
    again, the same."""
    done = _reached_before(faults, record)
    if faults:
        _write(record, done + _unreached(faults[len(done) :]))
    return done


def _described(fault: Fault) -> dict:
    entry = {"fault": fault.describe(), "kind": fault.kind, "worker": fault.worker, "way": fault.way}
    return entry | {"seconds": fault.seconds, "trigger": fault.trigger, "at": fault.at}


def _unreached(faults: list[Fault]) -> list[dict]:
    return [_described(fault) | {"reached": False} for fault in faults]


def _reached_before(faults: list[Fault], record: Path) -> list[dict]:
    try:
        earlier = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    done = []
    for fault, entry in zip(faults, earlier, strict=False):
        if entry.get("fault") != fault.describe() or not entry.get("reached"):
            break
        done.append(entry)
    return done


class Timeline:
    """The training's steps over time, as read from its progress file: the step time around a fault."""

    def __init__(self, path: Path):
        self._path = path
        self._samples: list[tuple[float, int]] = []  # (when the observer wrote it, its steps)

    def read(self) -> dict:
        state = read_progress(self._path)
        if isinstance(state.get("time"), int | float) and isinstance(state.get("steps"), int):
            sample = (state["time"], state["steps"])
            if not self._samples or self._samples[-1] != sample:
                self._samples.append(sample)
        return state

    def since(self, start: float, state: dict) -> dict | None:
        """The steps from the first sample at `start` or later, once training had begun, to `state`,
        and the seconds between (never the start-up before the first step)."""
        first = next(((when, steps) for when, steps in self._samples if when >= start and steps > 0), None)
        if first is None or not isinstance(state.get("time"), int | float) or state["time"] <= first[0]:
            return None
        return _window(state.get("steps", 0) - first[1], state["time"] - first[0])

    def watch(self, seconds: float, ended: threading.Event) -> dict | None:
        """The steps taken over the next `seconds` (fewer if the worker ends), by this shaper's clock."""
        start, steps = time.time(), self.read().get("steps", 0)
        while not ended.wait(POLL) and time.time() - start < seconds:
            self.read()
        return _window(self.read().get("steps", 0) - steps, time.time() - start)


def _window(steps: int, seconds: float) -> dict | None:
    return {"steps": steps, "seconds": round(seconds, 3)} if seconds > 0 else None


def _go_through(faults, done: list[dict], *, progress, record, inject, undo, ended, say, worker) -> None:
    timeline = Timeline(progress)
    unreached = _unreached(faults)
    for index, fault in enumerate(faults):
        words = WORDS[fault.kind]
        entry = _described(fault)
        # The faults after this one, still to come: recorded as not reached, as `plan` wrote them.
        ahead = unreached[index + 1 :]
        while not reached(fault, state := timeline.read(), time.time()):
            if ended.wait(POLL):
                done.append(entry | {"reached": False})
                _write(record, done + ahead)
                say(f"{worker}: its training ended before {fault.when()}: {words.not_injected}")
                return
        inject(fault)
        entry |= {
            "reached": True,
            "cut_at": time.time(),
            "step": state.get("steps"),
            "epoch": state.get("epochs", 0) + 1,
        }
        # The step time over as long before the cut as the cut lasts (up to PACE_WINDOW), during
        # it, and as long after.
        window = min(fault.seconds, PACE_WINDOW)
        pace = {"before": timeline.since(entry["cut_at"] - window, state)}
        entry["step_time"] = pace
        done.append(entry)
        _write(record, done + ahead)
        say(f"{fault.describe()}: {words.injected} at step {entry['step']}")
        # The worker may end first (lost to its peers, or done): it was cut off to its end, and the
        # rules go; `healed_at` is then when, not a heal the training saw.
        cut_short = ended.wait(fault.seconds)
        undo(fault)
        entry["healed_at"] = time.time()
        pace["during"] = _window(
            timeline.read().get("steps", 0) - (entry["step"] or 0), entry["healed_at"] - entry["cut_at"]
        )
        if cut_short:
            entry["until_worker_end"] = True
        _write(record, done + ahead)
        how = f"its worker ended, {words.in_force}, after" if cut_short else f"{words.undone} after"
        say(f"{worker}: {how} {entry['healed_at'] - entry['cut_at']:.1f}s")
        if not cut_short:
            # Before the next fault is looked for: one inside this window would blur both figures.
            pace["after"] = timeline.watch(window, ended)
            _write(record, done + ahead)


def _write(path: Path, entries: list[dict]) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(entries), encoding="utf-8")
    os.replace(temporary, path)

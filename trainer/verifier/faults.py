"""The network faults the shapers injected (trainer/shaper/schedule.py), as the verdict reports them.

Each shaper records its worker's faults in the results directory: what each was, when it cut and
healed the worker (or changed a link's profile and restored it), and the step it hit. A link's
fault is applied by the shapers at both ends of every direction it names: the verdict reports it
once, as the first of them applied it, and says so when another applied it later or not at all.
The verdict gives each a `fault:` line; a fault the training never reached is a problem, since the
run did not test what it was asked to. Whether the cluster carried on is the rest of the verdict:
a PASS is the cluster riding the fault out.
"""

import json
from collections.abc import Sequence
from pathlib import Path

from trainer.contract.faults import WORDS, record_path
from trainer.contract.resultsdir import WorkerFiles


def records(
    directory: Path, names: list[str], restarts: list[dict] | None = None, *, asked: Sequence[str] = ()
) -> tuple[dict, ...]:
    """Every worker's recorded faults, in the workers' order, each in the order it was applied,
    with when the worker ended (`worker_ended_at`: its final status's time, written as its launcher
    finished; the verdict comes after every worker's end, and may come before its shaper's last word).

    With the keeper's `restarts` (compose.recovery.yaml), a fault the cluster failed after is given
    the first restart after its cut (`restart`, counted from 1, and `cluster_failed_at`): the
    worker's final status is then a later run's. A fault `asked` for (described) that no shaper
    recorded comes last, as `recorded: False`: nothing says the run tested it."""
    found = []
    for name in names:
        try:
            entries = json.loads(Path(record_path(str(directory), name)).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # No fault for this worker (or no shaper at all).
        try:
            ended = WorkerFiles(Path(directory), name).status.stat().st_mtime
        except OSError:
            ended = None
        found += [
            entry | {"by": name, "worker_ended_at": ended} | _restart_after(entry, restarts or []) for entry in entries
        ]
    told = {entry["fault"] for entry in found}
    return _once(found) + tuple({"fault": fault, "recorded": False} for fault in asked if fault not in told)


def _once(entries: list[dict]) -> tuple[dict, ...]:
    """Each link's fault once, as the first of its ends applied it, with what every end did
    (`ends`: whose shaper, and the step and time it applied it, if it did); cuts as they are."""
    order: list[dict | str] = []
    ends: dict[str, list[dict]] = {}
    for entry in entries:
        if entry.get("kind") != "link":
            order.append(entry)
            continue
        if entry["fault"] not in ends:
            order.append(entry["fault"])
        ends.setdefault(entry["fault"], []).append(entry)
    return tuple(item if isinstance(item, dict) else _merged(ends[item]) for item in order)


def _merged(entries: list[dict]) -> dict:
    applied = sorted((entry for entry in entries if entry.get("reached")), key=lambda entry: entry["cut_at"])
    first = applied[0] if applied else entries[0]
    return first | {
        "ends": [
            {"by": entry["by"]}
            | ({"step": entry.get("step"), "cut_at": entry["cut_at"]} if entry.get("reached") else {})
            for entry in entries
        ]
    }


def _restart_after(entry: dict, restarts: list[dict]) -> dict:
    if not entry.get("reached"):
        return {}
    for number, restart in enumerate(restarts, 1):
        failed_at = restart.get("failed_at")
        if isinstance(failed_at, int | float) and failed_at >= entry["cut_at"]:
            return {"restart": number, "cluster_failed_at": failed_at}
    return {}


# Seconds between the first and the last of a link's ends applying its fault past which its line
# says so: they read the same training's progress, a poll apart (trainer/shaper/schedule.py), unless
# one was still in an earlier fault of its own then.
LATE_END = 1.0


def line(entry: dict) -> str:
    return _line(entry) + _late_end(entry)


def _late_end(entry: dict) -> str:
    applied = [end for end in entry.get("ends", []) if "cut_at" in end]
    if len(applied) < 2:
        return ""
    last = max(applied, key=lambda end: end["cut_at"])
    late = last["cut_at"] - entry["cut_at"]
    return f"; {last['by']}'s shaper applied it {late:.1f}s later, at step {last['step']}" if late > LATE_END else ""


def _line(entry: dict) -> str:
    if entry.get("recorded") is False:
        return f"fault: {entry['fault']}: no shaper recorded it, injected or not"
    if not entry.get("reached"):
        return f"fault: {entry['fault']}: not reached, the training ended first"
    words = WORDS[entry.get("kind", "cut")]
    said = f"fault: {entry['fault']}: {words.injected} at step {entry.get('step')}"
    # A worker that ended during its cut was never healed, whenever its shaper took the rules away.
    healed = None if entry.get("until_worker_end") else entry.get("healed_at")
    # What ended it: the cluster's failure that the keeper restarted, or else the worker's own end.
    end = entry["cluster_failed_at"] if "restart" in entry else entry.get("worker_ended_at")
    healed_first = healed is not None and (end is None or healed <= end)
    if healed_first:
        said += f", {words.undone} {healed - entry['cut_at']:.1f}s later"
    if end is None:
        return said + _pace(entry)
    still = "" if healed_first else f", still {words.in_force}"
    if "restart" in entry:
        return (
            said
            + _pace(entry)
            + (
                f"; the cluster failed {end - entry['cut_at']:.1f}s after {words.itself}{still}, and restart "
                f"{entry['restart']} began it again from its newest checkpoint"
            )
        )
    ended = entry["worker"] or "the training"
    return said + _pace(entry) + f"; {ended} ended {end - entry['cut_at']:.1f}s after {words.itself}{still}"


def _pace(entry: dict) -> str:
    """`; steps 0.061s each before, none in 2.0s during, 0.060s each after`, from the shaper's timeline."""
    windows = entry.get("step_time") or {}
    said = []
    for name in ("before", "during", "after"):
        window = windows.get(name)
        if not window:
            continue
        if window["steps"] <= 0:
            said.append(f"none in {window['seconds']:.1f}s {name}")
        else:
            said.append(f"{window['seconds'] / window['steps']:.3f}s each {name}")
    return f"; steps {', '.join(said)}" if said else ""


def problems(entries: tuple[dict, ...]) -> tuple[str, ...]:
    said = []
    for entry in entries:
        missed = [end["by"] for end in entry.get("ends", []) if "cut_at" not in end]
        if entry.get("recorded") is False:
            said.append(
                f"fault never recorded: {entry['fault']}: no shaper of its workers said it injected it, "
                "or that the training ended first: the run did not test it"
            )
        elif not entry.get("reached"):
            said.append(
                f"fault never injected: {entry['fault']} (the training ended before it): the run did not test it"
            )
        elif missed:
            said.append(
                f"fault injected at only some of its ends: {entry['fault']}: not by the shaper of "
                f"{', '.join(missed)} (its training ended before it): the run did not test it whole"
            )
    return tuple(said)

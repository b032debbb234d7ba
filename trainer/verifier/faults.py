"""The network faults the shapers injected (trainer/shaper/schedule.py), as the verdict reports them.

Each shaper records its worker's faults in the results directory: what each was, when it cut and
healed the worker, and the step it hit. The verdict gives each a `fault:` line; a fault the
training never reached is a problem, since the run did not test what it was asked to. Whether
the cluster carried on is the rest of the verdict: a PASS is the cluster riding the fault out.
"""

import json
from pathlib import Path

from trainer.contract.faults import record_path
from trainer.contract.resultsdir import WorkerFiles


def records(directory: Path, names: list[str]) -> tuple[dict, ...]:
    """Every worker's recorded faults, in the workers' order, each in the order it was applied,
    with when the worker ended (`worker_ended_at`: its final status's time, written as its launcher
    finished; the verdict comes after every worker's end, and may come before its shaper's last word)."""
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
        found += [entry | {"worker_ended_at": ended} for entry in entries]
    return tuple(found)


def line(entry: dict) -> str:
    if not entry.get("reached"):
        return f"fault: {entry['fault']}: not reached, the training ended first"
    said = f"fault: {entry['fault']}: cut at step {entry.get('step')}"
    healed, ended = entry.get("healed_at"), entry.get("worker_ended_at")
    if healed is not None and (ended is None or healed <= ended):
        said += f", healed {healed - entry['cut_at']:.1f}s later"
    if ended is not None:
        still = "" if healed is not None and healed <= ended else ", still cut off"
        said += f"; {entry['worker']} ended {ended - entry['cut_at']:.1f}s after the cut{still}"
    return said


def problems(entries: tuple[dict, ...]) -> tuple[str, ...]:
    return tuple(
        f"fault never injected: {entry['fault']} (the training ended before it): the run did not test it"
        for entry in entries
        if not entry.get("reached")
    )

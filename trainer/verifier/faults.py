"""The network faults the shapers injected (trainer/shaper/schedule.py), as the verdict reports them.

Each shaper records its worker's faults in the results directory: what each was, when it cut and
healed the worker, and the step it hit. The verdict gives each a `fault:` line; a fault the
training never reached is a problem, since the run did not test what it was asked to. Whether
the cluster carried on is the rest of the verdict: a PASS is the cluster riding the fault out.
"""

import json
from pathlib import Path

from trainer.contract.faults import record_path


def records(directory: Path, names: list[str]) -> tuple[dict, ...]:
    """Every worker's recorded faults, in the workers' order, each in the order it was applied."""
    found = []
    for name in names:
        try:
            found += json.loads(Path(record_path(str(directory), name)).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # No fault for this worker (or no shaper at all).
    return tuple(found)


def line(entry: dict) -> str:
    if not entry.get("reached"):
        return f"fault: {entry['fault']}: not reached, the training ended first"
    said = f"fault: {entry['fault']}: cut at step {entry.get('step')}"
    if entry.get("healed_at") is not None:
        said += f", healed {entry['healed_at'] - entry['cut_at']:.1f}s later"
    if entry.get("worker_ended_at") is not None:
        said += f"; {entry['worker']} ended {entry['worker_ended_at'] - entry['cut_at']:.1f}s after the cut"
    return said


def problems(entries: tuple[dict, ...]) -> tuple[str, ...]:
    return tuple(
        f"fault never injected: {entry['fault']} (the training ended before it): the run did not test it"
        for entry in entries
        if not entry.get("reached")
    )

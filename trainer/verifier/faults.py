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


def records(directory: Path, names: list[str], restarts: list[dict] | None = None) -> tuple[dict, ...]:
    """Every worker's recorded faults, in the workers' order, each in the order it was applied,
    with when the worker ended (`worker_ended_at`: its final status's time, written as its launcher
    finished; the verdict comes after every worker's end, and may come before its shaper's last word).

    With the keeper's `restarts` (compose.recovery.yaml), a fault the cluster failed after is given
    the first restart after its cut (`restart`, counted from 1, and `cluster_failed_at`): the
    worker's final status is then a later run's."""
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
        found += [entry | {"worker_ended_at": ended} | _restart_after(entry, restarts or []) for entry in entries]
    return tuple(found)


def _restart_after(entry: dict, restarts: list[dict]) -> dict:
    if not entry.get("reached"):
        return {}
    for number, restart in enumerate(restarts, 1):
        failed_at = restart.get("failed_at")
        if isinstance(failed_at, int | float) and failed_at >= entry["cut_at"]:
            return {"restart": number, "cluster_failed_at": failed_at}
    return {}


def line(entry: dict) -> str:
    if not entry.get("reached"):
        return f"fault: {entry['fault']}: not reached, the training ended first"
    said = f"fault: {entry['fault']}: cut at step {entry.get('step')}"
    # A worker that ended during its cut was never healed, whenever its shaper took the rules away.
    healed = None if entry.get("until_worker_end") else entry.get("healed_at")
    # What ended it: the cluster's failure that the keeper restarted, or else the worker's own end.
    end = entry["cluster_failed_at"] if "restart" in entry else entry.get("worker_ended_at")
    healed_first = healed is not None and (end is None or healed <= end)
    if healed_first:
        said += f", healed {healed - entry['cut_at']:.1f}s later"
    if end is None:
        return said + _pace(entry)
    still = "" if healed_first else ", still cut off"
    if "restart" in entry:
        return (
            said
            + _pace(entry)
            + (
                f"; the cluster failed {end - entry['cut_at']:.1f}s after the cut{still}, and restart "
                f"{entry['restart']} began it again from its newest checkpoint"
            )
        )
    return said + _pace(entry) + f"; {entry['worker']} ended {end - entry['cut_at']:.1f}s after the cut{still}"


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
    return tuple(
        f"fault never injected: {entry['fault']} (the training ended before it): the run did not test it"
        for entry in entries
        if not entry.get("reached")
    )

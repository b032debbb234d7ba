"""The observer's cost (trainer/observer/), for `scripts/benchmark --observer` (tfcluster.commands.benchmark).

Two measures, each from one run of this command (medians of alternating runs):
- on each example, run through scripts/run: the time the observer's own records say it took (each
  fingerprint's `seconds`, summed per worker, the busiest worker's), against the training
  program's wall time as its launcher reports it;
- on the tutorial's program as two bare processes: with the observer installed against without,
  which counts its import hook and its patches too, not only its fingerprints.
The target: under 2% of the run.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tfcluster.paths import ROOT

TARGET_SHARE = 0.02
EXAMPLES = {
    "tutorial (custom loop, end only)": [
        "--project", "examples/tutorial", "--command", "python multiworker_train.py",
    ],
    "examples/custom-loop (checkpoints)": ["--project", "examples/custom-loop"],
    "examples/keras-fit (fit, BackupAndRestore)": [
        "--project", "examples/keras-fit", "--data", "examples/keras-fit/data", "--env", "TF_USE_LEGACY_KERAS=1",
    ],
    "the built-in trainer (checkpoints)": [],
}  # fmt: skip
# The tutorial run with the observer installed as the image installs it, its records in a file of its own.
OBSERVED = """
import os, runpy, sys, tempfile
descriptor, path = tempfile.mkstemp(suffix=".jsonl")
from trainer.observer import install
install({"TFCLUSTER_OBSERVER": path})
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
_USED = re.compile(r"(worker-\d+)-1 +\| launcher \| \S+: training program used ([\d.]+)s")
_RECORD = re.compile(r"(worker-\d+)-1 +\| (\{\"event\":\"observed\".*)$")


def observed_run(arguments: list[str], project) -> dict:
    """One scripts/run as `project` (the benchmark's), taken down after: the busiest worker's observer
    seconds, its program's seconds, the points."""
    try:
        result = subprocess.run(
            [str(ROOT / "scripts" / "run"), *arguments],
            cwd=ROOT,
            env={**os.environ, "COMPOSE_PROJECT_NAME": project.name},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        project.down(check=True)  # scripts/run leaves its last run's stopped containers, as Compose does.
    if result.returncode != 0 or "verdict: PASS" not in result.stdout:
        raise RuntimeError(f"scripts/run {' '.join(arguments)} failed (exit {result.returncode}):\n{result.stdout}")
    observer: dict[str, float] = {}
    points: dict[str, int] = {}
    for line in result.stdout.splitlines():
        match = _RECORD.search(line)
        if match and '"kind":"state"' in match.group(2):
            record = json.loads(match.group(2))
            observer[match.group(1)] = observer.get(match.group(1), 0.0) + record["seconds"]
            points[match.group(1)] = points.get(match.group(1), 0) + 1
    programs = {name: float(seconds) for name, seconds in _USED.findall(result.stdout)}
    busiest = max(observer, key=observer.get)
    return {"observer_seconds": observer[busiest], "program_seconds": programs[busiest], "points": points[busiest]}


def bare_tutorial(observed: bool, bare_processes, tutorial: Path) -> float:
    command = [sys.executable, "-c", OBSERVED, tutorial.name] if observed else [sys.executable, tutorial.name]
    started = time.monotonic()
    bare_processes(command, cwd=tutorial.parent)
    return time.monotonic() - started


def measure(runs: int, *, project, bare_processes, tutorial: Path) -> dict:
    """`project`: the benchmark's Compose project (cases.project(), a tfcluster.cluster.compose.ComposeProject),
    which every run is taken down as; `bare_processes`: cases.bare_processes; `tutorial`: cases.TUTORIAL."""
    examples = {name: [] for name in EXAMPLES}
    bare = {"without": [], "with": []}
    for run in range(runs):
        for name, arguments in EXAMPLES.items():
            examples[name].append(observed_run(arguments, project))
        for side in ("without", "with") if run % 2 == 0 else ("with", "without"):
            bare[side].append(bare_tutorial(side == "with", bare_processes, tutorial))
        print(
            f"observer run {run + 1}/{runs}: bare tutorial {bare['without'][-1]:.2f}s / {bare['with'][-1]:.2f}s",
            flush=True,
        )
    return {"examples": examples, "bare": bare}


def table(result: dict) -> str:
    lines = [
        "| example | points recorded | observer (busiest worker) | training program | share |",
        "|---|---|---|---|---|",
    ]
    for name, samples in result["examples"].items():
        observer = statistics.median(sample["observer_seconds"] for sample in samples)
        program = statistics.median(sample["program_seconds"] for sample in samples)
        points = max(sample["points"] for sample in samples)
        lines.append(f"| {name} | {points} | {observer * 1000:.1f} ms | {program:.2f} s | {observer / program:.2%} |")
    without, with_observer = (statistics.median(result["bare"][side]) for side in ("without", "with"))
    ratio = with_observer / without
    met = (
        "met"
        if max(s["observer_seconds"] / s["program_seconds"] for v in result["examples"].values() for s in v)
        < TARGET_SHARE
        else "**not met**"
    )
    lines += [
        "",
        f"The tutorial's program as two bare processes: {without:.2f} s without the observer, "
        f"{with_observer:.2f} s with it ({ratio:.3f} x; medians of {len(result['bare']['with'])} alternating runs, "
        "which the machine's noise dominates).",
        "",
        f"Target: the observer under {TARGET_SHARE:.0%} of every example's run: {met}.",
    ]
    return "\n".join(lines) + "\n"

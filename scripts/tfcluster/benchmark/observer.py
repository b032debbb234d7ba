"""The observer's cost (trainer/observer/), for `scripts/benchmark --observer` (tfcluster.commands.benchmark).

The decisive measure is end to end: a training program's wall time with the observer installed
against without, each side two bare processes (cases.bare_processes), back to back in pairs whose
first side alternates, so that a slow spell of the machine falls on both sides alike. It counts
everything the observer costs a program: its import hook, its patches (every variable, strategy,
checkpoint and optimizer wrapped, the step's graph read once per trace), its fingerprints and its
records. Three programs (PROGRAMS): the tutorial's own, whose fixed costs dominate,
examples/custom-loop made longer, with a checkpoint, so a fingerprint, every epoch, and
examples/keras-fit (tf-keras `fit`), whose input reaches the steps through
`experimental_distribute_dataset`, each batch keyed by the observer (trainer/observer/data.py). The figure is
the median of the pairs' ratios, against the target: under 2 % of the run (observer_report.py).
Both processes' CPU-seconds are kept beside the wall times, as is the machine's load before each pair.

Secondary, how long the fingerprints themselves take: the observer's own timer (each record's
`seconds`, summed per worker, the busiest worker's), on the bare runs and on each example run
through scripts/run, against the training program's wall time as its launcher reports it.
"""

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tfcluster.benchmark import cases
from tfcluster.paths import ROOT

SIDES = ("without", "with")
EXAMPLE_RUNS = 2  # scripts/run of each example, at most: the own timer's share varies little.
LONG_EPOCHS, LONG_STEPS = 20, 150  # About 20 s bare on 2 idle cores, against the tutorial's 5 to 10 s.
FIT_EPOCHS = 12  # The Keras example's fit: an epoch's end, so a fingerprint, every 8 steps.


@dataclass(frozen=True)
class Program:
    title: str
    directory: Path
    script: str
    expected: str  # In every worker's output once the program has run to its end.
    environment: dict[str, str] = field(default_factory=dict)


PROGRAMS = {
    "tutorial": Program(
        "the tutorial's program (3 epochs of 4 steps; 1 point recorded)",
        cases.TUTORIAL.parent,
        cases.TUTORIAL.name,
        cases.SEED_FIGURES,
    ),
    "custom-loop": Program(
        f"examples/custom-loop, {LONG_EPOCHS} epochs of {LONG_STEPS} steps (a checkpoint each; "
        f"{LONG_EPOCHS + 1} points recorded)",
        ROOT / "examples" / "custom-loop",
        "train.py",
        '"event": "final"',
        {"LOOP_EPOCHS": str(LONG_EPOCHS), "LOOP_STEPS_PER_EPOCH": str(LONG_STEPS)},
    ),
    "keras-fit": Program(
        f"examples/keras-fit (tf-keras `fit`, BackupAndRestore), {FIT_EPOCHS} epochs of 8 steps "
        f"({FIT_EPOCHS + 1} points recorded)",
        ROOT / "examples" / "keras-fit",
        "train.py",
        '"event": "final"',
        {"TF_USE_LEGACY_KERAS": "1", "FIT_EPOCHS": str(FIT_EPOCHS)},
    ),
}
# Both sides start the program through this, so that the one difference is the observer, installed
# as the image's .pth file installs it (docker/Dockerfile), its records in a file per worker. Each
# worker is held to a core of its own, on both sides: two workers free to share the cores made the
# CPU-seconds of one program vary by a second from run to run, more than the observer's cost.
LAUNCH = """
import json, os, runpy, sys
records, program = sys.argv[1:]
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[index % len(os.sched_getaffinity(0))]})
if records:
    path = os.path.join(records, f"worker-{index}.jsonl")
    open(path, "a").close()
    from trainer.observer import install
    install({"TFCLUSTER_OBSERVER": path})
sys.argv = [program]
runpy.run_path(program, run_name="__main__")
"""
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
_USED = re.compile(r"(worker-\d+)-1 +\| launcher \| \S+: training program used ([\d.]+)s")
_RECORD = re.compile(r"(worker-\d+)-1 +\| (\{\"event\":\"observed\".*)$")


# -- measuring -------------------------------------------------------------------------------------


def measure(runs: int) -> dict:
    """Each example through scripts/run, then `runs` pairs of each program; every figure, for the JSON.

    The examples come first: they are the shorter part, and an observer that fails on one of them
    fails this command before the pairs' minutes are spent."""
    examples: dict[str, list[dict]] = {name: [] for name in EXAMPLES}
    project = cases.project()
    for number in range(min(runs, EXAMPLE_RUNS)):
        for name, arguments in EXAMPLES.items():
            examples[name].append(observed_run(arguments, project))
            print(f"observer | example {number + 1}/{min(runs, EXAMPLE_RUNS)} | {name}", flush=True)
    paired: dict[str, list[dict]] = {name: [] for name in PROGRAMS}
    for number in range(runs):
        for name, program in PROGRAMS.items():
            paired[name].append(pair(program, number))
            print(progress(name, paired[name][-1], number, runs), flush=True)
    return {
        "runs": runs,
        "cores": os.cpu_count() or 1,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "programs": {name: _described(program) for name, program in PROGRAMS.items()},
        "paired": paired,
        "examples": examples,
    }


def pair(program: Program, number: int) -> dict:
    """Both sides of pair `number` back to back, `without` first in even pairs: their seconds and
    CPU-seconds, the machine's load before, and the observer's own figures from its side."""
    order = SIDES if number % 2 == 0 else SIDES[::-1]
    load = os.getloadavg()[0]
    runs = {side: bare_run(program, observed=side == "with") for side in order}
    return {
        "first": order[0],
        "load": round(load, 2),
        "without": runs["without"]["seconds"],
        "with": runs["with"]["seconds"],
        "without_cpu": runs["without"]["cpu_seconds"],
        "with_cpu": runs["with"]["cpu_seconds"],
        "observer_seconds": runs["with"]["observer_seconds"],
        "points": runs["with"]["points"],
    }


def bare_run(program: Program, *, observed: bool) -> dict:
    """One run of `program` as two bare processes: its seconds, both processes' CPU-seconds (what
    other tenants of the machine change least) and, observed, the observer's own figures."""
    with tempfile.TemporaryDirectory(prefix="tfc-bench-observer-") as scratch:
        records = os.path.join(scratch, "records") if observed else ""
        if observed:
            os.mkdir(records)
        # A fresh checkpoint directory each run: custom-loop resumes from any checkpoint it finds.
        environment = {**program.environment, "TF_CHECKPOINT_DIR": os.path.join(scratch, "checkpoints")}
        command = [sys.executable, "-c", LAUNCH, records, program.script]
        started, cpu_started = time.monotonic(), _children_cpu()
        outputs = cases.bare_processes(command, cwd=program.directory, environment=environment)
        seconds, cpu_seconds = time.monotonic() - started, _children_cpu() - cpu_started
        if not all(program.expected in output for output in outputs):
            raise RuntimeError(f"{program.title} did not run to its end (no {program.expected!r}): {outputs}")
        if not observed:
            return {"seconds": seconds, "cpu_seconds": cpu_seconds}
        journals = {path.stem: path.read_text() for path in sorted(Path(records).glob("worker-*.jsonl"))}
    figures = own_timer(journals)
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, **figures[busiest(figures)]}


def _children_cpu() -> float:
    """User and system CPU-seconds of every child process this one has waited for (bare_processes waits)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_timer(journals: dict[str, str]) -> dict[str, dict]:
    """Each worker's fingerprints, from its records: their seconds summed, and how many. Refused if a
    worker recorded an error or no end: then the observer did less than its work, and cost less."""
    if len(journals) != 2:
        raise ValueError(f"records of {len(journals)} workers ({sorted(journals)}), not 2")
    figures = {}
    for worker, text in journals.items():
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        errors = [record for record in records if record["kind"] == "error"]
        states = [record for record in records if record["kind"] == "state"]
        if errors or not any(state["point"] == "end" for state in states):
            points = [state["point"] for state in states]
            raise ValueError(f"{worker}'s observer recorded the errors {errors} and the points {points}")
        figures[worker] = {"observer_seconds": sum(state["seconds"] for state in states), "points": len(states)}
    return figures


def busiest(figures: dict[str, dict]) -> str:
    """The worker whose fingerprints took longest: the one that holds the others up at each point."""
    return max(figures, key=lambda worker: figures[worker]["observer_seconds"])


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
        raise RuntimeError(
            f"scripts/run {' '.join(arguments)} failed (exit {result.returncode}):\n"
            f"{result.stdout}{result.stderr[-2000:]}"
        )
    journals: dict[str, str] = {}
    for line in result.stdout.splitlines():
        if match := _RECORD.search(line):
            journals[match.group(1)] = journals.get(match.group(1), "") + match.group(2) + "\n"
    figures = own_timer(journals)
    worker = busiest(figures)
    programs = dict(_USED.findall(result.stdout))
    return {**figures[worker], "program_seconds": float(programs[worker])}


def _described(program: Program) -> dict:
    return {
        "title": program.title,
        "command": f"python {program.script}",
        "directory": str(program.directory.relative_to(ROOT)),
        "environment": program.environment,
    }


def progress(name: str, figures: dict, number: int, runs: int) -> str:
    """The line printed after each pair: its own figures, so that an odd pair shows at once."""
    return (
        f"observer | pair {number + 1:>2}/{runs} | {name:<11} | without {figures['without']:6.2f} s | "
        f"with {figures['with']:6.2f} s | {figures['with'] / figures['without']:.3f} x | "
        f"CPU {figures['with_cpu'] / figures['without_cpu']:.3f} x | load {figures['load']:.2f}"
    )

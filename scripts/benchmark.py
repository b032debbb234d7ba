#!/usr/bin/env python3
"""Benchmark: scripts/run against the tutorial's bare processes, the edit loop, scaling, the image.

Run from the project root after scripts/setup (the machine is noisy, so every timed case runs
several times, alternating, and the report gives medians and ratios from this one run):

  .venv-bench/bin/python scripts/benchmark.py [--runs 5]

It writes docs/benchmark.md (the tables), docs/benchmark.json (for comparing runs) and
docs/benchmark.png (a chart). scripts/benchmark (the shell wrapper) sets up .venv-bench.
"""

import argparse
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import observer_cost  # scripts/observer_cost.py, the same way.
import workers as cluster_override  # scripts/workers.py: Python puts this file's folder on the path.
from compose_project import ComposeProject  # scripts/compose_project.py, the same way.

ROOT = Path(__file__).resolve().parent.parent

DOCS = ROOT / "docs"
IMAGE = "tfcluster:latest"
PROJECT = "tfc-bench"
# Published reference figures (not measured here): the official CPU image (tensorflow/tensorflow
# PR #59682) and a naive single-stage build of this project (measured once, docs/performance.md).
OFFICIAL_IMAGE_BYTES = 1.76e9
NAIVE_IMAGE_BYTES = 2.13e9
EDITED_FILE = ROOT / "trainer" / "training" / "output.py"
# The tutorial's own program (the seed's), and the figures it prints on both workers.
TUTORIAL = ROOT / "examples" / "tutorial" / "multiworker_train.py"
SEED_FIGURES = "replicas=2 initial_loss=0.7459 final_loss=0.4168 final_accuracy=0.8281"
ALLREDUCE_MIB = (1, 16, 64)
SCALING_WORKERS = (1, 2, 4, 8)
TARGETS = {
    "scripts_run_over_tutorial": 1.40,
    "round_trip_over_tutorial": 1.25,
    "dev_edit_to_verdict_seconds": 6.0,
    "scaling_over_limit": 1.30,
    "image_bytes": 1.40e9,
    "rebuild_after_edit_seconds": 10.0,
    "allreduce_container_over_process": 0.85,
}
# The all-reduce program in place of the trainer, on the two workers of compose.yaml.
ALLREDUCE_OVERRIDE = """services:
  worker-0: {command: [python, -m, trainer.benchmark.allreduce]}
  worker-1: {command: [python, -m, trainer.benchmark.allreduce]}
"""
# The same project (network, volume, limits, start order) with every container running
# `python -c pass`: what Compose and the engine cost before any of this project's code runs.
FLOOR_OVERRIDE = """services:
  worker-0: {entrypoint: [python, -c, pass]}
  worker-1: {entrypoint: [python, -c, pass]}
  verifier: {entrypoint: [python, -c, pass]}
"""


def project(*override_files: Path, environment: dict[str, str] | None = None) -> ComposeProject:
    """The benchmark's one project name, whatever the files: each case clears the last one's leftovers."""
    return ComposeProject(*override_files, name=PROJECT, environment=environment, cwd=ROOT)


# -- the two sides of the headline -----------------------------------------------------------------


def time_tutorial() -> float:
    """The tutorial's own program, launched as the tutorial does: two processes on 127.0.0.1 ports.

    worker-0.sh in the background and worker-1.sh in the foreground, each `TF_CONFIG=... exec
    python3 multiworker_train.py`, with the pinned TensorFlow of the image; the time is until both
    have exited, each having printed the seed's figures.
    """
    started = time.monotonic()
    outputs = bare_processes([sys.executable, TUTORIAL.name], cwd=TUTORIAL.parent)
    elapsed = time.monotonic() - started
    if not all(SEED_FIGURES in output for output in outputs):
        raise RuntimeError(f"the tutorial's bare processes gave other figures: {outputs}")
    return elapsed


# What scripts/run prints at each milestone of a run, in the order they are reported; the time of
# a milestone is that of its last line (every worker's, for the workers' lines).
MILESTONES = (
    ("containers created", re.compile(r"^ Container \S+ +Created$")),
    ("launchers up", re.compile(r"\| launcher \| \S+: waiting for \d+ peer")),
    ("programs started", re.compile(r"\| worker \d+ of \d+ \| ")),
    ("rendezvous complete", re.compile(r"\| launcher \| \S+: all \d+ workers agree")),
    ("training started (TensorFlow imported)", re.compile(r'\| \{"event": "start"')),
    ("final metrics", re.compile(r'\| \{"event": "final"')),
    ("programs ended", re.compile(r"\| launcher \| \S+: training program used")),
    ("verdict", re.compile(r"\| verdict: ")),
)


def time_scripts_run(*arguments: str) -> tuple[float, dict[str, float]]:
    """`scripts/run ARGUMENTS` as a user runs it (the image built): seconds to its exit, and when
    each milestone's last line came, from its output as it streams."""
    started = time.monotonic()
    process = subprocess.Popen(
        [str(ROOT / "scripts" / "run"), *arguments],
        cwd=ROOT,
        env={**os.environ, "COMPOSE_PROJECT_NAME": PROJECT},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: dict[str, float] = {}
    lines = []
    for line in process.stdout:
        now = time.monotonic() - started
        lines.append(line)
        for name, pattern in MILESTONES:
            if pattern.search(line.rstrip("\n")):
                seen[name] = now
    process.wait()
    elapsed = time.monotonic() - started
    project().down(check=True)
    if process.returncode != 0 or "verdict: PASS" not in "".join(lines):
        raise RuntimeError(f"scripts/run {' '.join(arguments)} failed (exit {process.returncode}):\n{''.join(lines)}")
    return elapsed, {**seen, "scripts/run exited": elapsed}


def _tf_config(cluster: list[str], index: int) -> str:
    return json.dumps({"cluster": {"worker": cluster}, "task": {"type": "worker", "index": index}})


# -- Compose itself, and the other cases --------------------------------------------------------------

_USED = re.compile(r"training program used ([\d.]+)s, ([\d.]+) CPU-seconds")


def compose_run(workers: int = 2, override_text: str = "") -> tuple[float, list[tuple[float, float]]]:
    """The Compose round trip: seconds from `docker compose up` to the verifier's verdict and then
    `down`, with the image built; and each worker's program time and CPU-seconds (its launcher's)."""
    with tempfile.TemporaryDirectory() as directory:
        if workers != cluster_override.DEFAULT_WORKERS:
            override_text = cluster_override.render(workers, base_file=str(ROOT / "compose.yaml"))
        files: tuple[Path, ...] = ()
        if override_text:
            override = Path(directory) / "override.yaml"
            override.write_text(override_text)
            files = (override,)
        cluster = project(*files)
        cluster.down(check=True)
        started = time.monotonic()
        # No timeout: how long this takes is the measure.
        result = cluster.verdict(timeout=None)
        verdict = time.monotonic() - started
        logs = cluster.compose("logs", "--no-log-prefix", timeout=None).stdout
        down_started = time.monotonic()
        cluster.down(check=True)
        elapsed = verdict + time.monotonic() - down_started
    if result.returncode != 0:
        raise RuntimeError(f"the {workers}-worker Compose run failed (exit {result.returncode}):\n{result.stdout}")
    return elapsed, [(float(used), float(cpu)) for used, cpu in _USED.findall(logs)]


def bare_processes(command: list[str], cwd: Path = ROOT) -> list[str]:
    """Two processes of `command` with TF_CONFIG on 127.0.0.1 ports, as the tutorial launches them;
    their outputs, once both have exited 0."""
    cluster = [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [
        subprocess.Popen(
            command,
            cwd=cwd,
            env={**environment, "TF_CONFIG": _tf_config(cluster, index)},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for index in range(2)
    ]
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    if any(process.returncode != 0 for process in processes):
        raise RuntimeError(f"the bare-process run of {shlex.join(command)} failed: {outputs}")
    return outputs


def time_bare_floor() -> float:
    """The bare side's own floor: two `python -c pass` processes, started together."""
    started = time.monotonic()
    processes = [subprocess.Popen([sys.executable, "-c", "pass"]) for _ in range(2)]
    if any(process.wait(timeout=60) != 0 for process in processes):
        raise RuntimeError("`python -c pass` failed")
    return time.monotonic() - started


def allreduce_figures(output: str) -> dict[int, float]:
    """MB/s by size in MiB, from worker 0's JSON lines."""
    figures = {}
    for line in output.splitlines():
        if line.startswith("{") and '"event": "allreduce"' in line:
            record = json.loads(line)
            figures[record["mib"]] = record["mb_per_s"]
    if sorted(figures) != sorted(ALLREDUCE_MIB):
        raise RuntimeError(f"the all-reduce run reported sizes {sorted(figures)}:\n{output}")
    return figures


def allreduce_bare() -> dict[int, float]:
    return allreduce_figures(bare_processes([sys.executable, "-m", "trainer.benchmark.allreduce"])[0])


def allreduce_containers() -> dict[int, float]:
    with tempfile.TemporaryDirectory() as directory:
        override = Path(directory) / "allreduce.yaml"
        override.write_text(ALLREDUCE_OVERRIDE)
        cluster = project(override)
        cluster.down(check=True)
        try:
            # No verifier: this program reports figures, not training metrics.
            cluster.compose("up", "worker-0", "worker-1", timeout=None)
            output = cluster.logs("worker-0", check=True)
        finally:
            cluster.down(check=True)
    return allreduce_figures(output)


def setup(*options: str) -> float:
    """Seconds of scripts/setup (which builds the trainer image when it is not current)."""
    started = time.monotonic()
    subprocess.run([str(ROOT / "scripts" / "setup"), *options], cwd=ROOT, check=True, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def time_edit_loops() -> tuple[float, float, float]:
    """After a one-line edit of a trainer file: the rebuild, edit to verdict through the image
    (the rebuild, then scripts/run), and edit to verdict in development mode (scripts/run --dev)."""
    original = EDITED_FILE.read_text()
    try:
        EDITED_FILE.write_text(original + f"\n# benchmark edit {time.time()}\n")
        rebuilt = setup()
        through_image = rebuilt + time_scripts_run()[0]
        EDITED_FILE.write_text(original + f"\n# benchmark edit {time.time()}\n")
        development = time_scripts_run("--dev")[0]
    finally:
        EDITED_FILE.write_text(original)
        setup()  # The image current again, built from the checkout as it is.
    return rebuilt, through_image, development


def image_bytes() -> int:
    inspected = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", IMAGE], capture_output=True, text=True, check=True
    )
    return int(inspected.stdout.strip())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _ratio_range(numerators: list[float], denominators: list[float]) -> list[float]:
    """The least and greatest ratio of the pairs, each measured back to back."""
    ratios = [numerator / denominator for numerator, denominator in zip(numerators, denominators, strict=True)]
    return [min(ratios), max(ratios)]


def measure(runs: int) -> dict:
    samples: dict[str, list[float]] = {
        key: []
        for key in (
            "tutorial_seconds",
            "scripts_run_seconds",
            "compose_round_trip_seconds",
            "bare_floor_seconds",
            "compose_floor_seconds",
            "rebuild_after_edit_seconds",
            "edit_to_verdict_seconds",
            "dev_edit_to_verdict_seconds",
        )
    }
    milestones: dict[str, list[float]] = {name: [] for name, _ in MILESTONES}
    milestones["scripts/run exited"] = []
    program: dict[int, list[float]] = {workers: [] for workers in SCALING_WORKERS}
    cpu: dict[int, list[float]] = {workers: [] for workers in SCALING_WORKERS}
    verdict: dict[int, list[float]] = {workers: [] for workers in SCALING_WORKERS}
    allreduce: dict[str, dict[int, list[float]]] = {
        side: {mib: [] for mib in ALLREDUCE_MIB} for side in ("processes", "containers")
    }
    for run in range(runs):
        # Alternating, so that a slow spell of the machine falls on every side alike; the headline's
        # two sides back to back, so that each pair gives a ratio of its own.
        samples["tutorial_seconds"].append(time_tutorial())
        seconds, seen = time_scripts_run()
        samples["scripts_run_seconds"].append(seconds)
        for name in milestones:
            milestones[name].append(seen.get(name, float("nan")))
        for workers in SCALING_WORKERS:
            seconds, used = compose_run(workers)
            if len(used) != workers:
                raise RuntimeError(f"the {workers}-worker run reported {len(used)} launchers' figures")
            verdict[workers].append(seconds)
            program[workers].append(max(wall for wall, _ in used))
            cpu[workers].append(statistics.mean(cpu_seconds for _, cpu_seconds in used))
        samples["compose_round_trip_seconds"].append(verdict[2][-1])
        samples["bare_floor_seconds"].append(time_bare_floor())
        samples["compose_floor_seconds"].append(compose_run(override_text=FLOOR_OVERRIDE)[0])
        rebuilt, through_image, development = time_edit_loops()
        samples["rebuild_after_edit_seconds"].append(rebuilt)
        samples["edit_to_verdict_seconds"].append(through_image)
        samples["dev_edit_to_verdict_seconds"].append(development)
        for side, measure_side in (("processes", allreduce_bare), ("containers", allreduce_containers)):
            for mib, figure in measure_side().items():
                allreduce[side][mib].append(figure)
        print(
            f"run {run + 1}/{runs}: tutorial {samples['tutorial_seconds'][-1]:.2f}s  "
            f"scripts/run {samples['scripts_run_seconds'][-1]:.2f}s  "
            f"round trip {samples['compose_round_trip_seconds'][-1]:.2f}s  "
            f"floors {samples['bare_floor_seconds'][-1]:.2f}s/{samples['compose_floor_seconds'][-1]:.2f}s  "
            f"rebuild {rebuilt:.2f}s  edit-to-verdict {through_image:.2f}s (--dev {development:.2f}s)  "
            + "  ".join(f"{workers}w {verdict[workers][-1]:.2f}s" for workers in SCALING_WORKERS)
            + "  all-reduce MB/s "
            + " ".join(
                f"{mib}MiB {allreduce['processes'][mib][-1]:.0f}/{allreduce['containers'][mib][-1]:.0f}"
                for mib in ALLREDUCE_MIB
            ),
            flush=True,
        )
    size = image_bytes()
    medians = {key: statistics.median(values) for key, values in samples.items()}
    allreduce_medians = {
        side: {str(mib): statistics.median(values) for mib, values in by_size.items()}
        for side, by_size in allreduce.items()
    }
    one_wall, one_cpu = statistics.median(program[1]), statistics.median(cpu[1])
    cores = os.cpu_count() or 1
    scaling = {
        str(workers): {
            "verdict_seconds": statistics.median(verdict[workers]),
            "program_seconds": statistics.median(program[workers]),
            "cpu_seconds_per_worker": statistics.median(cpu[workers]),
            # N workers' CPU-seconds can go no faster than the cores allow, and none faster than one alone.
            "cpu_bound_limit_seconds": max(one_wall, workers * one_cpu / cores),
        }
        for workers in SCALING_WORKERS
    }
    for figures in scaling.values():
        figures["over_limit"] = figures["program_seconds"] / figures["cpu_bound_limit_seconds"]
    return {
        "event": "benchmark",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": runs,
        "cores": cores,
        "samples": samples,
        "medians": medians,
        "milestones_seconds": {name: statistics.median(values) for name, values in milestones.items()},
        "milestones_samples": milestones,
        "image_bytes": size,
        "scaling": scaling,
        "scaling_samples": {
            str(workers): {"verdict": verdict[workers], "program": program[workers], "cpu": cpu[workers]}
            for workers in SCALING_WORKERS
        },
        "allreduce_mb_per_s": allreduce_medians,
        "allreduce_samples": {
            side: {str(mib): values for mib, values in by_size.items()} for side, by_size in allreduce.items()
        },
        "ratios": {
            "scripts_run_over_tutorial": medians["scripts_run_seconds"] / medians["tutorial_seconds"],
            "scripts_run_over_tutorial_pairs": _ratio_range(
                samples["scripts_run_seconds"], samples["tutorial_seconds"]
            ),
            "round_trip_over_tutorial": medians["compose_round_trip_seconds"] / medians["tutorial_seconds"],
            "round_trip_over_tutorial_pairs": _ratio_range(
                samples["compose_round_trip_seconds"], samples["tutorial_seconds"]
            ),
            # The least ratio Compose could reach here: bare training plus Compose's fixed cost.
            "floor_over_tutorial": (
                medians["tutorial_seconds"] + medians["compose_floor_seconds"] - medians["bare_floor_seconds"]
            )
            / medians["tutorial_seconds"],
            "image_over_official": size / OFFICIAL_IMAGE_BYTES,
            "image_over_naive": size / NAIVE_IMAGE_BYTES,
            "allreduce_container_over_process": {
                str(mib): allreduce_medians["containers"][str(mib)] / allreduce_medians["processes"][str(mib)]
                for mib in ALLREDUCE_MIB
            },
        },
        "targets": TARGETS,
    }


def table(result: dict) -> str:
    medians, ratios, targets = result["medians"], result["ratios"], result["targets"]

    def verdict(ok: bool) -> str:
        return "met" if ok else "**not met**"

    def pairs(key: str) -> str:
        low, high = ratios[f"{key}_pairs"]
        return f"{ratios[key]:.2f} x tutorial (pairs {low:.2f} to {high:.2f})"

    rows = [
        (
            "**`scripts/run`** (image built), to its exit",
            f"{medians['scripts_run_seconds']:.2f} s",
            pairs("scripts_run_over_tutorial"),
            f"<= {targets['scripts_run_over_tutorial']:.2f} x: "
            + verdict(ratios["scripts_run_over_tutorial"] <= targets["scripts_run_over_tutorial"]),
        ),
        (
            "The tutorial's program, two bare processes launched as the tutorial does",
            f"{medians['tutorial_seconds']:.2f} s",
            "",
            "",
        ),
        (
            "Compose round trip: `up --exit-code-from verifier verifier` to the verdict, then `down`",
            f"{medians['compose_round_trip_seconds']:.2f} s",
            pairs("round_trip_over_tutorial"),
            f"<= {targets['round_trip_over_tutorial']:.2f} x: "
            + verdict(ratios["round_trip_over_tutorial"] <= targets["round_trip_over_tutorial"]),
        ),
        (
            "Compose's fixed cost: the same round trip, every container running `python -c pass`",
            f"{medians['compose_floor_seconds']:.2f} s (bare: {medians['bare_floor_seconds']:.2f} s)",
            f"{ratios['floor_over_tutorial']:.2f} x tutorial: the least reachable",
            "",
        ),
        (
            "Edit one trainer file, then `scripts/run --dev` (no build)",
            f"{medians['dev_edit_to_verdict_seconds']:.2f} s",
            "",
            f"<= {targets['dev_edit_to_verdict_seconds']:.0f} s: "
            + verdict(medians["dev_edit_to_verdict_seconds"] <= targets["dev_edit_to_verdict_seconds"]),
        ),
        (
            "Edit one trainer file, then rebuild and `scripts/run`",
            f"{medians['edit_to_verdict_seconds']:.2f} s",
            f"rebuild {medians['rebuild_after_edit_seconds']:.2f} s",
            f"rebuild <= {targets['rebuild_after_edit_seconds']:.0f} s: "
            + verdict(medians["rebuild_after_edit_seconds"] <= targets["rebuild_after_edit_seconds"]),
        ),
        (
            "Image size",
            f"{result['image_bytes'] / 1e9:.2f} GB",
            f"{ratios['image_over_official']:.2f} x official 1.76 GB; {ratios['image_over_naive']:.2f} x naive 2.13 GB",
            f"<= 1.40 GB: {verdict(result['image_bytes'] <= targets['image_bytes'])}",
        ),
    ]
    allreduce, target = result["allreduce_mb_per_s"], targets["allreduce_container_over_process"]
    for mib, ratio in ratios["allreduce_container_over_process"].items():
        rows.append(
            (
                f"All-reduce {mib} MiB, containers (processes)",
                f"{allreduce['containers'][mib]:.0f} MB/s ({allreduce['processes'][mib]:.0f} MB/s)",
                f"{ratio:.2f} x processes",
                f">= {target:.2f} x: {verdict(ratio >= target)}",
            )
        )
    lines = [
        f"Medians of {result['runs']} alternating runs on {result['cores']} cores, {result['when']}.",
        "",
        "| measure | median | ratio | target |",
        "|---|---|---|---|",
    ]
    lines += [f"| {name} | {value} | {ratio} | {target} |" for name, value, ratio, target in rows]
    lines += [
        "",
        "## Scaling",
        "",
        "The same training with N workers (scripts/workers.py), each taking the same per-worker batch. Program:",
        "the slowest worker's training program, from its start (TensorFlow's import included) to its exit, as its",
        "launcher reports it. CPU-bound limit: the least that time can be on this machine, N times one worker's",
        "CPU-seconds (the 1-worker run's) over the cores, and never less than one worker alone.",
        "",
        "| workers | time to verdict and `down` | program | CPU-s per worker | CPU-bound limit | program / limit "
        "| target |",
        "|---|---|---|---|---|---|---|",
    ]
    for workers, figures in result["scaling"].items():
        within = figures["over_limit"] <= targets["scaling_over_limit"]
        lines.append(
            f"| {workers} | {figures['verdict_seconds']:.2f} s | {figures['program_seconds']:.2f} s | "
            f"{figures['cpu_seconds_per_worker']:.2f} | {figures['cpu_bound_limit_seconds']:.2f} s | "
            f"{figures['over_limit']:.2f} x | <= {targets['scaling_over_limit']:.2f} x: {verdict(within)} |"
        )
    lines += [
        "",
        "## Where one `scripts/run` spends its time",
        "",
        "From the start of `scripts/run` (its set-up, then `down` of the last run, then `up`): when the last",
        "line of each milestone came, medians; the programs start before the rendezvous completes (they",
        "import TensorFlow while the launchers meet).",
        "",
        "| milestone | at | since the one before |",
        "|---|---|---|",
    ]
    before = 0.0
    for name, at in sorted(result["milestones_seconds"].items(), key=lambda item: item[1]):
        lines.append(f"| {name} | {at:.2f} s | {at - before:+.2f} s |")
        before = at
    lines += [
        "",
        "The tutorial's side is examples/tutorial/multiworker_train.py, as the tutorial launches it: two",
        "processes with TF_CONFIG on 127.0.0.1 ports, the pinned TensorFlow of the image, until both exit.",
        "`scripts/run` is the main job as a user runs it, with the image built, as the Compose project",
        f"{PROJECT}; each pair ran back to back. All-reduce: MB/s is the tensor's size over the median time",
        "of one all-reduce of float32 ones between the two workers (worker 0's figure). The official image",
        "and the naive single-stage build are published figures, not measured here.",
        "",
        "![benchmark chart](benchmark.png)",
    ]
    return "\n".join(lines) + "\n"


def chart(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    samples = result["samples"]
    cases = (
        ("tutorial,\nbare", "tutorial_seconds"),
        ("scripts/\nrun", "scripts_run_seconds"),
        ("Compose\nround trip", "compose_round_trip_seconds"),
        ("edit,\n--dev", "dev_edit_to_verdict_seconds"),
        ("edit,\nrebuild", "edit_to_verdict_seconds"),
    )
    figure, ((times, milestones), (scaling, allreduce)) = pyplot.subplots(2, 2, figsize=(14, 9))
    times.boxplot([samples[key] for _, key in cases], tick_labels=[label for label, _ in cases])
    times.set_ylabel("seconds")
    times.set_title("time to verdict and edit loop")

    ordered = sorted(result["milestones_seconds"].items(), key=lambda item: item[1])
    milestones.barh([name for name, _ in ordered], [at for _, at in ordered])
    milestones.invert_yaxis()
    milestones.set_xlabel("seconds from the start of scripts/run")
    milestones.set_title("one scripts/run")

    workers = sorted(result["scaling"], key=int)
    scaling.plot(workers, [result["scaling"][n]["program_seconds"] for n in workers], "o-", label="program")
    scaling.plot(workers, [result["scaling"][n]["cpu_bound_limit_seconds"] for n in workers], "s--", label="limit")
    scaling.plot(workers, [result["scaling"][n]["verdict_seconds"] for n in workers], "^:", label="to verdict")
    scaling.set_xlabel("workers")
    scaling.set_ylabel("seconds")
    scaling.set_title(f"scaling on {result['cores']} cores")
    scaling.legend()

    sizes = [str(mib) for mib in ALLREDUCE_MIB]
    positions = range(len(sizes))
    for offset, side in ((-0.2, "processes"), (0.2, "containers")):
        allreduce.bar(
            [position + offset for position in positions],
            [result["allreduce_mb_per_s"][side][size] for size in sizes],
            width=0.4,
            label=side,
        )
    allreduce.set_xticks(list(positions), [f"{size} MiB" for size in sizes])
    allreduce.set_ylabel("MB/s")
    allreduce.set_title("all-reduce throughput, 2 workers")
    allreduce.legend()
    figure.suptitle(f"tfcluster benchmark, medians of {result['runs']} runs ({result['when']})")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


# -- network profiles (compose.network.yaml) --------------------------------------------------------

NETWORK_PROFILES = ("lan", "wan", "lossy", "thin")
_MEASURED = re.compile(r"^verifier-1  \| (worker-0: network .*)$", re.MULTILINE)


def network_run(profile: str, steps: int) -> tuple[float, str]:
    """Worker 0's training time (its launcher's figure) and its shaper's measurements, under `profile`."""
    environment = {"TF_NETWORK_PROFILE": profile, "TRAIN_STEPS_PER_EPOCH": str(steps)}
    cluster = project(ROOT / "compose.network.yaml", environment=environment)
    cluster.down(check=True)
    try:
        result = cluster.verdict(timeout=None)
        log = cluster.logs("worker-0", check=True)
    finally:
        cluster.down(check=True)
    used, measured = _USED.search(log), _MEASURED.search(result.stdout)
    if result.returncode != 0 or not used or not measured:
        raise RuntimeError(f"the {profile} run failed (exit {result.returncode}):\n{result.stdout}")
    return float(used.group(1)), measured.group(1)


def network_table(runs: int, steps: int) -> str:
    seconds: dict[str, list[float]] = {profile: [] for profile in NETWORK_PROFILES}
    measured: dict[str, str] = {}
    for run in range(runs):
        for profile in NETWORK_PROFILES:  # Alternating, as the other cases.
            used, measured[profile] = network_run(profile, steps)
            seconds[profile].append(used)
        print(f"run {run + 1}/{runs}: " + "  ".join(f"{p} {seconds[p][-1]:.1f}s" for p in NETWORK_PROFILES), flush=True)
    medians = {profile: statistics.median(values) for profile, values in seconds.items()}
    lines = [
        f"Medians of {runs} alternating runs, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: the default",
        f"training with {steps} steps an epoch ({3 * steps} steps), two workers, each profile applied by",
        "compose.network.yaml. Time: worker 0's training program, from its start (TensorFlow's import",
        "included) to its exit, as its launcher reports it. Measured: worker 0's shaper, before training.",
        "",
        "| profile | training time | vs lan | measured before training (worker 0 to worker 1) |",
        "|---|---|---|---|",
    ]
    for profile in NETWORK_PROFILES:
        ratio = medians[profile] / medians["lan"]
        lines.append(
            f"| {profile} | {medians[profile]:.1f} s | {ratio:.2f} x | {measured[profile].split(': ', 1)[1]} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    # The help is what `scripts/benchmark --help` prints (run by python3, before any set-up), and
    # docs/commands.md shows it (tests/unit/test_commands.py).
    parser = argparse.ArgumentParser(
        prog="scripts/benchmark",
        description=__doc__.split("\n")[0]
        + "\n\nscripts/benchmark sets up what it needs first (scripts/setup, then .venv-bench with the pinned"
        "\nwheels and matplotlib), then runs scripts/benchmark.py with .venv-bench's python. Not a test: the"
        "\nfigures are reported, not asserted. It runs as the Compose project tfc-bench, apart from tfcluster.",
        epilog="""\
writes:
  docs/benchmark.md, docs/benchmark.json, docs/benchmark.png    (every case but the network's)
  docs/network-benchmark.md                                     (with --network)
  docs/observer-benchmark.md                                    (with --observer)

examples:
  scripts/benchmark                          # every case, 5 runs each (about 10 minutes)
  scripts/benchmark --runs 9                 # steadier medians, slower
  scripts/benchmark --network --steps 20     # training time under each network profile
  scripts/benchmark --observer --runs 3      # what the synchronization check's observer costs

exit status:
  0    ok: measured, and the figures written
  1    a measurement failed: the traceback says which
  2    config error: a bad argument, named in one line before anything is set up; or
       scripts/setup could not proceed (Docker missing or not running)
  any other: set-up failed, and said why""",
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=100, max_help_position=24),
    )
    parser.add_argument("--runs", type=int, default=5, metavar="N", help="runs of each timed case (default: 5)")
    parser.add_argument(
        "--network",
        action="store_true",
        help="only training time under each network profile, against lan (default: off)",
    )
    parser.add_argument(
        "--observer",
        action="store_true",
        help="only the observer's cost on the examples, against each training program (default: off)",
    )
    parser.add_argument(
        "--steps", type=int, default=50, metavar="N", help="with --network: steps an epoch (default: 50)"
    )
    arguments = parser.parse_args(argv)
    if arguments.runs < 1:
        parser.error(f"--runs ({arguments.runs}) must be at least 1")
    if arguments.steps < 1:
        parser.error(f"--steps ({arguments.steps}) must be at least 1")
    if arguments.network:
        text = network_table(arguments.runs, arguments.steps)
        (DOCS / "network-benchmark.md").write_text("# Training under each network profile\n\n" + text)
        print(text)
        return 0
    if arguments.observer:
        observed = observer_cost.measure(
            arguments.runs, project=project(), bare_processes=bare_processes, tutorial=TUTORIAL
        )
        text = observer_cost.table(observed)
        (DOCS / "observer-benchmark.md").write_text("# The observer's cost\n\n" + text)
        print(text)
        return 0
    result = measure(arguments.runs)
    (DOCS / "benchmark.json").write_text(json.dumps(result, indent=2) + "\n")
    (DOCS / "benchmark.md").write_text("# Benchmark\n\n" + table(result))
    chart(result, DOCS / "benchmark.png")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

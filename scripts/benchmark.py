#!/usr/bin/env python3
"""Benchmark: the Compose cluster against the tutorial's bare processes, the image, the edit loop.

Run from the project root after scripts/setup (the machine is noisy, so every timed case runs
several times, alternating, and the report gives medians and ratios from this one run):

  .venv-bench/bin/python scripts/benchmark.py [--runs 3]

It writes docs/benchmark.md (a table), docs/benchmark.json (for comparing runs) and
docs/benchmark.png (a chart). scripts/benchmark (the shell wrapper) sets up .venv-bench.
"""

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
ALLREDUCE_MIB = (1, 16, 64)
SCALING_WORKERS = (1, 2, 4)
TARGETS = {
    "compose_over_bare": 1.10,
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


def time_compose_run(workers: int = 2, override_text: str = "") -> float:
    """Seconds from `docker compose up` to the verifier's verdict, with the image built."""
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
        elapsed = time.monotonic() - started
        cluster.down(check=True)
    if result.returncode != 0:
        raise RuntimeError(f"the {workers}-worker Compose run failed (exit {result.returncode}):\n{result.stdout}")
    return elapsed


def bare_processes(module: str) -> list[str]:
    """The tutorial's launch: two `python -m MODULE` processes on 127.0.0.1 ports; their outputs."""
    ports = [_free_port(), _free_port()]
    cluster = [f"127.0.0.1:{port}" for port in ports]
    processes = []
    # Checkpoints as in compose.yaml, so that both sides do the same work.
    with tempfile.TemporaryDirectory(prefix="tfc-bench-checkpoints-") as checkpoints:
        for index in range(2):
            tf_config = {"cluster": {"worker": cluster}, "task": {"type": "worker", "index": index}}
            environment = {
                **os.environ,
                "TF_CONFIG": json.dumps(tf_config),
                "PYTHONPATH": str(ROOT),
                "TF_CHECKPOINT_DIR": checkpoints,
            }
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", module],
                    cwd=ROOT,
                    env=environment,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            )
        outputs = [process.communicate(timeout=300)[0] for process in processes]
    if any(process.returncode != 0 for process in processes):
        raise RuntimeError(f"the bare-process run of {module} failed: {outputs}")
    return outputs


def time_bare_floor() -> float:
    """The bare side's own floor: two `python -c pass` processes, started together."""
    started = time.monotonic()
    processes = [subprocess.Popen([sys.executable, "-c", "pass"]) for _ in range(2)]
    if any(process.wait(timeout=60) != 0 for process in processes):
        raise RuntimeError("`python -c pass` failed")
    return time.monotonic() - started


def time_bare_processes() -> float:
    started = time.monotonic()
    outputs = bare_processes("trainer.training")
    elapsed = time.monotonic() - started
    if not all("final_loss=0.4168" in output for output in outputs):
        raise RuntimeError(f"the bare-process run gave other figures: {outputs}")
    return elapsed


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
    return allreduce_figures(bare_processes("trainer.benchmark.allreduce")[0])


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


def time_rebuild_after_edit() -> tuple[float, float]:
    """Seconds to rebuild after a one-line edit of a trainer file, and from the edit to the verdict."""
    original = EDITED_FILE.read_text()
    cluster = project()
    try:
        EDITED_FILE.write_text(original + f"\n# benchmark edit {time.time()}\n")
        started = time.monotonic()
        cluster.compose("build", "--quiet", timeout=None, check=True)
        rebuilt = time.monotonic() - started
        verdict = time_compose_run()
    finally:
        EDITED_FILE.write_text(original)
    cluster.compose("build", "--quiet", timeout=None, check=True)
    return rebuilt, rebuilt + verdict


def image_bytes() -> int:
    inspected = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", IMAGE], capture_output=True, text=True, check=True
    )
    return int(inspected.stdout.strip())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def measure(runs: int) -> dict:
    samples: dict[str, list[float]] = {
        "bare_processes_seconds": [],
        "compose_seconds": [],
        "bare_floor_seconds": [],
        "compose_floor_seconds": [],
        "rebuild_after_edit_seconds": [],
        "edit_to_verdict_seconds": [],
    }
    scaling: dict[int, list[float]] = {workers: [] for workers in SCALING_WORKERS}
    allreduce: dict[str, dict[int, list[float]]] = {
        side: {mib: [] for mib in ALLREDUCE_MIB} for side in ("processes", "containers")
    }
    for run in range(runs):
        # Alternating, so that a slow spell of the machine falls on both sides alike.
        samples["bare_processes_seconds"].append(time_bare_processes())
        samples["compose_seconds"].append(time_compose_run())
        samples["bare_floor_seconds"].append(time_bare_floor())
        samples["compose_floor_seconds"].append(time_compose_run(override_text=FLOOR_OVERRIDE))
        rebuilt, total = time_rebuild_after_edit()
        samples["rebuild_after_edit_seconds"].append(rebuilt)
        samples["edit_to_verdict_seconds"].append(total)
        for workers in SCALING_WORKERS:
            # The two-worker case is the Compose run above; timing it twice would add nothing.
            scaling[workers].append(samples["compose_seconds"][-1] if workers == 2 else time_compose_run(workers))
        for side, measure_side in (("processes", allreduce_bare), ("containers", allreduce_containers)):
            for mib, figure in measure_side().items():
                allreduce[side][mib].append(figure)
        print(
            f"run {run + 1}/{runs}: bare {samples['bare_processes_seconds'][-1]:.2f}s  "
            f"compose {samples['compose_seconds'][-1]:.2f}s  "
            f"floors {samples['bare_floor_seconds'][-1]:.2f}s/{samples['compose_floor_seconds'][-1]:.2f}s  "
            f"rebuild {rebuilt:.2f}s  edit-to-verdict {total:.2f}s  "
            + "  ".join(f"{workers}w {scaling[workers][-1]:.2f}s" for workers in SCALING_WORKERS)
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
    return {
        "event": "benchmark",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": runs,
        "samples": samples,
        "medians": medians,
        "image_bytes": size,
        "scaling_seconds": {str(workers): statistics.median(values) for workers, values in scaling.items()},
        "scaling_samples": {str(workers): values for workers, values in scaling.items()},
        "allreduce_mb_per_s": allreduce_medians,
        "allreduce_samples": {
            side: {str(mib): values for mib, values in by_size.items()} for side, by_size in allreduce.items()
        },
        "ratios": {
            "compose_over_bare": medians["compose_seconds"] / medians["bare_processes_seconds"],
            # The least ratio Compose could reach here: bare training plus Compose's fixed cost.
            "floor_over_bare": (
                medians["bare_processes_seconds"] + medians["compose_floor_seconds"] - medians["bare_floor_seconds"]
            )
            / medians["bare_processes_seconds"],
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

    rows = [
        ("Time to verdict, two bare processes (tutorial launch)", f"{medians['bare_processes_seconds']:.2f} s", "", ""),
        (
            "Time to verdict, Compose cluster (image built)",
            f"{medians['compose_seconds']:.2f} s",
            f"{ratios['compose_over_bare']:.2f} x bare",
            f"<= {targets['compose_over_bare']:.2f} x: "
            + verdict(ratios["compose_over_bare"] <= targets["compose_over_bare"]),
        ),
        (
            "Compose's fixed cost: the same project, every container running `python -c pass`",
            f"{medians['compose_floor_seconds']:.2f} s (bare: {medians['bare_floor_seconds']:.2f} s)",
            f"{ratios['floor_over_bare']:.2f} x bare: the least reachable",
            "",
        ),
        (
            "Image size",
            f"{result['image_bytes'] / 1e9:.2f} GB",
            f"{ratios['image_over_official']:.2f} x official 1.76 GB; {ratios['image_over_naive']:.2f} x naive 2.13 GB",
            f"<= 1.40 GB: {verdict(result['image_bytes'] <= targets['image_bytes'])}",
        ),
        (
            "Rebuild after editing one trainer file",
            f"{medians['rebuild_after_edit_seconds']:.2f} s",
            "",
            f"<= 10 s: {verdict(medians['rebuild_after_edit_seconds'] <= targets['rebuild_after_edit_seconds'])}",
        ),
        ("Edit to verdict (rebuild + Compose run)", f"{medians['edit_to_verdict_seconds']:.2f} s", "", ""),
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
    two = result["scaling_seconds"]["2"]
    for workers, seconds in result["scaling_seconds"].items():
        rows.append(
            (f"Time to verdict, {workers} worker(s) in Compose", f"{seconds:.2f} s", f"{seconds / two:.2f} x 2", "")
        )
    lines = [
        f"Medians of {result['runs']} alternating runs, {result['when']}.",
        "",
        "| measure | median | ratio | target |",
        "|---|---|---|---|",
    ]
    lines += [f"| {name} | {value} | {ratio} | {target} |" for name, value, ratio, target in rows]
    lines += [
        "",
        "The bare-process side is `python -m trainer.training` (or `python -m trainer.benchmark.allreduce`)",
        "twice with TF_CONFIG on 127.0.0.1 ports (no launcher); the Compose side is `docker compose up",
        "--exit-code-from verifier verifier`, rendezvous and verifier included. All-reduce: MB/s is the",
        "tensor's size over the median time of one all-reduce of float32 ones between the two workers (worker",
        "0's figure). Scaling: the same training with 1, 2 and 4 workers (scripts/workers.py), each worker",
        "taking the same per-worker batch, on this machine's 2 cores. The official image and the naive",
        "single-stage build are published figures, not measured here.",
        "",
        "![benchmark chart](benchmark.png)",
    ]
    return "\n".join(lines) + "\n"


def chart(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    samples = result["samples"]
    labels = ["bare\nprocesses", "Compose\ncluster", "rebuild\nafter edit", "edit to\nverdict"]
    keys = ["bare_processes_seconds", "compose_seconds", "rebuild_after_edit_seconds", "edit_to_verdict_seconds"]
    figure, (times, scaling, allreduce) = pyplot.subplots(1, 3, figsize=(14, 4.5))
    times.boxplot([samples[key] for key in keys], tick_labels=labels)
    times.set_ylabel("seconds")
    times.set_title("time to verdict and edit loop")

    workers = sorted(result["scaling_samples"], key=int)
    scaling.boxplot([result["scaling_samples"][count] for count in workers], tick_labels=workers)
    scaling.set_xlabel("workers")
    scaling.set_ylabel("seconds to verdict")
    scaling.set_title("scaling (Compose)")

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
_USED = re.compile(r"training program used ([\d.]+)s")
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

examples:
  scripts/benchmark                          # every case, 3 runs each
  scripts/benchmark --runs 5                 # steadier medians, slower
  scripts/benchmark --network --steps 20     # training time under each network profile

exit status:
  0    ok: measured, and the figures written
  1    a measurement failed: the traceback says which
  2    config error: a bad argument, named in one line before anything is set up; or
       scripts/setup could not proceed (Docker missing or not running)
  any other: set-up failed, and said why""",
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=100, max_help_position=24),
    )
    parser.add_argument("--runs", type=int, default=3, metavar="N", help="runs of each timed case (default: 3)")
    parser.add_argument(
        "--network",
        action="store_true",
        help="only training time under each network profile, against lan (default: off)",
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
    result = measure(arguments.runs)
    (DOCS / "benchmark.json").write_text(json.dumps(result, indent=2) + "\n")
    (DOCS / "benchmark.md").write_text("# Benchmark\n\n" + table(result))
    chart(result, DOCS / "benchmark.png")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The benchmark's orchestration: every timed case of cases.py, `runs` times over, then medians and ratios.

`measure(runs)` returns what docs/benchmark.json holds, and what report.py renders. The machine is
noisy, so the cases alternate within each run and the result keeps every sample beside its median.
"""

import os
import statistics
import time
from dataclasses import dataclass, field

from tfcluster.benchmark import cases

# Published reference figures (not measured here): the official CPU image (tensorflow/tensorflow
# PR #59682) and a naive single-stage build of this project (measured once, docs/performance.md).
OFFICIAL_IMAGE_BYTES = 1.76e9
NAIVE_IMAGE_BYTES = 2.13e9
SCALING_WORKERS = (1, 2, 4, 8)
# compose.yaml's own cluster, whose run of the scaling cases is also the headline's round trip.
ROUND_TRIP_WORKERS = 2
TARGETS = {
    "scripts_run_over_tutorial": 1.40,
    "round_trip_over_tutorial": 1.25,
    "dev_edit_to_verdict_seconds": 6.0,
    "scaling_over_limit": 1.30,
    "image_bytes": 1.40e9,
    "rebuild_after_edit_seconds": 10.0,
    "allreduce_container_over_process": 0.85,
}
# The timed cases, in the order docs/benchmark.json lists their samples and medians.
TIMED = (
    "tutorial_seconds",
    "scripts_run_seconds",
    "compose_round_trip_seconds",
    "bare_floor_seconds",
    "compose_floor_seconds",
    "rebuild_after_edit_seconds",
    "edit_to_verdict_seconds",
    "dev_edit_to_verdict_seconds",
)
SIDES = ("processes", "containers")


def _by_workers() -> dict[int, list[float]]:
    return {workers: [] for workers in SCALING_WORKERS}


@dataclass
class Samples:
    """Every run's figures, case by case, in the order they were measured."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: {key: [] for key in TIMED})
    milestones: dict[str, list[float]] = field(
        default_factory=lambda: {name: [] for name in [*(name for name, _ in cases.MILESTONES), cases.EXITED]}
    )
    # By number of workers: to the verdict and `down`; the slowest worker's program; CPU-seconds per worker.
    verdict: dict[int, list[float]] = field(default_factory=_by_workers)
    program: dict[int, list[float]] = field(default_factory=_by_workers)
    cpu: dict[int, list[float]] = field(default_factory=_by_workers)
    # MB/s by side (bare processes, containers), then by size in MiB.
    allreduce: dict[str, dict[int, list[float]]] = field(
        default_factory=lambda: {side: {mib: [] for mib in cases.ALLREDUCE_MIB} for side in SIDES}
    )


def measure(runs: int) -> dict:
    """Every case `runs` times, a line of figures after each run; the result for docs/benchmark.json."""
    samples = Samples()
    for run in range(runs):
        measure_once(samples)
        print(progress(samples, run, runs), flush=True)
    size = cases.image_bytes()
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return summarize(samples, runs, size=size, cores=os.cpu_count() or 1, when=when)


def measure_once(samples: Samples) -> None:
    """One sample of every case, added to `samples`."""
    # Alternating, so that a slow spell of the machine falls on every side alike; the headline's
    # two sides back to back, so that each pair gives a ratio of its own.
    seconds = samples.seconds
    seconds["tutorial_seconds"].append(cases.time_tutorial())
    run_seconds, seen = cases.time_scripts_run()
    seconds["scripts_run_seconds"].append(run_seconds)
    for name, values in samples.milestones.items():
        values.append(seen.get(name, float("nan")))
    _measure_scaling(samples)
    seconds["compose_round_trip_seconds"].append(samples.verdict[ROUND_TRIP_WORKERS][-1])
    seconds["bare_floor_seconds"].append(cases.time_bare_floor())
    seconds["compose_floor_seconds"].append(cases.compose_run(override_text=cases.FLOOR_OVERRIDE)[0])
    rebuilt, through_image, development = cases.time_edit_loops()
    seconds["rebuild_after_edit_seconds"].append(rebuilt)
    seconds["edit_to_verdict_seconds"].append(through_image)
    seconds["dev_edit_to_verdict_seconds"].append(development)
    for side, measure_side in zip(SIDES, (cases.allreduce_bare, cases.allreduce_containers), strict=True):
        for mib, figure in measure_side().items():
            samples.allreduce[side][mib].append(figure)


def _measure_scaling(samples: Samples) -> None:
    for workers in SCALING_WORKERS:
        seconds, used = cases.compose_run(workers)
        # Each launcher reports its own program: one missing means a worker's figures would be wrong.
        if len(used) != workers:
            raise RuntimeError(f"the {workers}-worker run reported {len(used)} launchers' figures")
        samples.verdict[workers].append(seconds)
        samples.program[workers].append(max(wall for wall, _ in used))
        samples.cpu[workers].append(statistics.mean(cpu_seconds for _, cpu_seconds in used))


def progress(samples: Samples, run: int, runs: int) -> str:
    """The line printed after run `run` (from 0): its own figures, so that a slow or odd run shows at once."""
    last = {key: values[-1] for key, values in samples.seconds.items()}
    allreduce = samples.allreduce
    return (
        f"run {run + 1}/{runs}: tutorial {last['tutorial_seconds']:.2f}s  "
        f"scripts/run {last['scripts_run_seconds']:.2f}s  "
        f"round trip {last['compose_round_trip_seconds']:.2f}s  "
        f"floors {last['bare_floor_seconds']:.2f}s/{last['compose_floor_seconds']:.2f}s  "
        f"rebuild {last['rebuild_after_edit_seconds']:.2f}s  "
        f"edit-to-verdict {last['edit_to_verdict_seconds']:.2f}s (--dev {last['dev_edit_to_verdict_seconds']:.2f}s)  "
        + "  ".join(f"{workers}w {samples.verdict[workers][-1]:.2f}s" for workers in SCALING_WORKERS)
        + "  all-reduce MB/s "
        + " ".join(
            f"{mib}MiB {allreduce['processes'][mib][-1]:.0f}/{allreduce['containers'][mib][-1]:.0f}"
            for mib in cases.ALLREDUCE_MIB
        )
    )


def summarize(samples: Samples, runs: int, *, size: int, cores: int, when: str) -> dict:
    """The result of `runs` runs: medians, ratios and targets, beside every sample they come from."""
    medians = {key: statistics.median(values) for key, values in samples.seconds.items()}
    allreduce_medians = {
        side: {str(mib): statistics.median(values) for mib, values in by_size.items()}
        for side, by_size in samples.allreduce.items()
    }
    # String keys throughout, as JSON has them: the report reads this dict or its JSON alike.
    return {
        "event": "benchmark",
        "when": when,
        "runs": runs,
        "cores": cores,
        "samples": samples.seconds,
        "medians": medians,
        "milestones_seconds": {name: statistics.median(values) for name, values in samples.milestones.items()},
        "milestones_samples": samples.milestones,
        "image_bytes": size,
        "scaling": scaling(samples, cores),
        "scaling_samples": {
            str(workers): {
                "verdict": samples.verdict[workers],
                "program": samples.program[workers],
                "cpu": samples.cpu[workers],
            }
            for workers in SCALING_WORKERS
        },
        "allreduce_mb_per_s": allreduce_medians,
        "allreduce_samples": {
            side: {str(mib): values for mib, values in by_size.items()} for side, by_size in samples.allreduce.items()
        },
        "ratios": ratios(samples.seconds, medians, allreduce_medians, size),
        "targets": TARGETS,
    }


def scaling(samples: Samples, cores: int) -> dict[str, dict[str, float]]:
    """By number of workers: the medians, the CPU-bound limit, and the program's time over that limit."""
    one_wall, one_cpu = statistics.median(samples.program[1]), statistics.median(samples.cpu[1])
    figures = {
        str(workers): {
            "verdict_seconds": statistics.median(samples.verdict[workers]),
            "program_seconds": statistics.median(samples.program[workers]),
            "cpu_seconds_per_worker": statistics.median(samples.cpu[workers]),
            # N workers' CPU-seconds can go no faster than the cores allow, and none faster than one alone.
            "cpu_bound_limit_seconds": max(one_wall, workers * one_cpu / cores),
        }
        for workers in SCALING_WORKERS
    }
    for each in figures.values():
        each["over_limit"] = each["program_seconds"] / each["cpu_bound_limit_seconds"]
    return figures


def ratios(
    seconds: dict[str, list[float]],
    medians: dict[str, float],
    allreduce_medians: dict[str, dict[str, float]],
    size: int,
) -> dict:
    """The ratios the targets are set on, of the medians; the headline's also as the range of its pairs."""
    tutorial = medians["tutorial_seconds"]
    return {
        "scripts_run_over_tutorial": medians["scripts_run_seconds"] / tutorial,
        "scripts_run_over_tutorial_pairs": ratio_range(seconds["scripts_run_seconds"], seconds["tutorial_seconds"]),
        "round_trip_over_tutorial": medians["compose_round_trip_seconds"] / tutorial,
        "round_trip_over_tutorial_pairs": ratio_range(
            seconds["compose_round_trip_seconds"], seconds["tutorial_seconds"]
        ),
        # The least ratio Compose could reach here: bare training plus Compose's fixed cost.
        "floor_over_tutorial": (tutorial + medians["compose_floor_seconds"] - medians["bare_floor_seconds"]) / tutorial,
        "image_over_official": size / OFFICIAL_IMAGE_BYTES,
        "image_over_naive": size / NAIVE_IMAGE_BYTES,
        "allreduce_container_over_process": {
            str(mib): allreduce_medians["containers"][str(mib)] / allreduce_medians["processes"][str(mib)]
            for mib in cases.ALLREDUCE_MIB
        },
    }


def ratio_range(numerators: list[float], denominators: list[float]) -> list[float]:
    """The least and greatest ratio of the pairs, each measured back to back."""
    pairs = [numerator / denominator for numerator, denominator in zip(numerators, denominators, strict=True)]
    return [min(pairs), max(pairs)]

"""Training under each network profile (compose.network.yaml), for `scripts/benchmark --network`.

The default training, two workers: unshaped (compose.yaml alone), then each profile applied by
compose.network.yaml, alternating, run after run. Two figures each: worker 0's training program
as its launcher reports it (TensorFlow's import included), and its step time, from the
timestamps Docker gives its epoch lines (the first epoch's end to the last's, so neither the
start-up nor the first steps' tracing). `none` against `lan` is the cost of the shaping
machinery itself (a shaper, its measurements, the launcher's wait), where nothing is shaped.
Then a cut that loses a worker: the time from the cut to the worker's end, run by run.
"""

import datetime
import re
import statistics
import time

from tfcluster.benchmark.cases import PROGRAM_USED, project
from tfcluster.paths import ROOT
from trainer.contract.shaping import PROFILE_NAMES

# compose.network.yaml's profiles (TF_NETWORK_PROFILE), lan first: every other is reported against it.
NETWORK_PROFILES = PROFILE_NAMES
UNSHAPED = "none"  # compose.yaml alone: no shaper at all.
CASES = (UNSHAPED, *NETWORK_PROFILES)
# What worker 0's shaper measured before training, as the verifier's log relays it.
_MEASURED = re.compile(r"^verifier-1  \| (worker-0: network .*)$", re.MULTILINE)
# `docker compose logs --timestamps --no-log-prefix`: `2026-12-05T12:00:00.123456789Z train | epoch:   2/3 ...`.
_EPOCH_LINE = re.compile(r"^(\S+) train \| epoch:\s+(\d+)/(\d+)", re.MULTILINE)
# The cut that loses worker-1, and what the verdict says of it.
CUT = "cut worker-1 at step 6 for 120s"
_ENDED = re.compile(r"^verifier-1  \| fault: .*; worker-1 ended ([\d.]+)s after the cut", re.MULTILINE)


def step_seconds(log: str, steps: int) -> float:
    """The mean step time between the first epoch's end and the last's, from the log's timestamps."""
    ends = [(_when(moment), int(epoch)) for moment, epoch, _ in _EPOCH_LINE.findall(log)]
    if len(ends) < 2:
        raise ValueError(f"fewer than two epoch lines in the log to time the steps by ({len(ends)})")
    (first, first_epoch), (last, last_epoch) = ends[0], ends[-1]
    return (last - first).total_seconds() / ((last_epoch - first_epoch) * steps)


def _when(moment: str) -> datetime.datetime:
    # Docker gives nanoseconds; Python takes microseconds.
    head, _, fraction = moment.rstrip("Z").partition(".")
    return datetime.datetime.fromisoformat(f"{head}.{fraction[:6].ljust(6, '0')}+00:00")


def network_run(case: str, steps: int) -> dict:
    """Worker 0's training time and step time under `case` (a profile, or UNSHAPED), and what its
    shaper measured."""
    environment = {"TRAIN_STEPS_PER_EPOCH": str(steps)}
    if case == UNSHAPED:
        cluster = project(environment=environment)
    else:
        cluster = project(ROOT / "compose.network.yaml", environment={**environment, "TF_NETWORK_PROFILE": case})
    cluster.down(check=True)
    try:
        result = cluster.verdict(timeout=None)
        log = cluster.compose("logs", "--no-color", "--no-log-prefix", "--timestamps", "worker-0", check=True).stdout
    finally:
        cluster.down(check=True)
    used, measured = PROGRAM_USED.search(log), _MEASURED.search(result.stdout)
    if result.returncode != 0 or not used or (case != UNSHAPED and not measured):
        raise RuntimeError(f"the {case} run failed (exit {result.returncode}):\n{result.stdout}")
    return {
        "seconds": float(used.group(1)),
        "step_seconds": step_seconds(log, steps),
        "measured": measured.group(1).split(": ", 1)[1] if measured else "not shaped: no shaper",
    }


def cut_run() -> float:
    """The seconds from the cut to worker-1's end, as the verdict's fault line gives them."""
    environment = {"TF_NETWORK_PROFILE": "lan", "TF_NETWORK_FAULTS": CUT, "TRAIN_EPOCHS": "100000"}
    cluster = project(ROOT / "compose.network.yaml", environment=environment)
    cluster.down(check=True)
    try:
        result = cluster.verdict(timeout=600)
    finally:
        cluster.down(check=True)
    ended = _ENDED.search(result.stdout)
    if result.returncode != 7 or not ended:
        raise RuntimeError(f"the cut did not lose worker-1 as expected (exit {result.returncode}):\n{result.stdout}")
    return float(ended.group(1))


def network_table(runs: int, steps: int) -> str:
    """docs/network-benchmark.md's body, from `runs` runs of every case with `steps` steps an epoch."""
    figures = measure_cases(runs, steps)
    cuts = []
    for run in range(runs):
        cuts.append(cut_run())
        print(f"cut {run + 1}/{runs}: worker-1 ended {cuts[-1]:.1f}s after the cut", flush=True)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return render(figures, cuts, runs=runs, steps=steps, when=when)


def measure_cases(runs: int, steps: int) -> dict[str, list[dict]]:
    """Every case's figures, run by run, alternating as the other benchmarks do."""
    figures: dict[str, list[dict]] = {case: [] for case in CASES}
    for run in range(runs):
        for case in CASES:
            figures[case].append(network_run(case, steps))
        said = "  ".join(f"{case} {figures[case][-1]['step_seconds'] * 1000:.1f} ms" for case in CASES)
        print(f"run {run + 1}/{runs}: step time {said}", flush=True)
    return figures


def render(figures: dict[str, list[dict]], cuts: list[float], *, runs: int, steps: int, when: str) -> str:
    """The table of every case's medians against lan's, every run's figure kept, then the cuts."""
    median = {
        case: {key: statistics.median(run[key] for run in runs_of) for key in ("seconds", "step_seconds")}
        for case, runs_of in figures.items()
    }
    lan = median["lan"]
    lines = [
        f"Medians of {runs} alternating runs, {when}: the default training with {steps} steps an",
        f"epoch ({3 * steps} steps), two workers; `none` is compose.yaml alone, every other row a profile",
        "applied by compose.network.yaml. Training: worker 0's training program, from its start",
        "(TensorFlow's import included) to its exit, as its launcher reports it. Step: the mean step",
        "time from the first epoch's end to the last's, by Docker's timestamps of the epoch lines.",
        "Measured: worker 0's shaper, before training (the last run's).",
        "",
        "| network | training | vs lan | each run (s) | step | vs lan | each run (ms) | measured before training |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case in CASES:
        mine = median[case]
        each = ", ".join(f"{run['seconds']:.1f}" for run in figures[case])
        steps_each = ", ".join(f"{run['step_seconds'] * 1000:.1f}" for run in figures[case])
        lines.append(
            f"| {case} | {mine['seconds']:.1f} s | {mine['seconds'] / lan['seconds']:.2f} x | {each} "
            f"| {mine['step_seconds'] * 1000:.1f} ms | {mine['step_seconds'] / lan['step_seconds']:.2f} x "
            f"| {steps_each} | {figures[case][-1]['measured']} |"
        )
    cost = lan["seconds"] / median[UNSHAPED]["seconds"] - 1
    lines += [
        "",
        f"The cost of shaping with `lan` (a shaper beside each worker, nothing shaped): {cost:+.1%} of the",
        "training program's time against `none` (medians); the step time is in the table.",
        "",
        f"A cut that loses a worker (`{CUT}`, `lan`, `TRAIN_EPOCHS=100000`), {len(cuts)} runs: the",
        "seconds from the cut to worker-1's end, lost to its peer (exit 5, the verdict exit 7), as the",
        f"verdict's fault line gives them: {', '.join(f'{cut:.1f}' for cut in cuts)} (median "
        f"{statistics.median(cuts):.1f} s).",
    ]
    return "\n".join(lines) + "\n"

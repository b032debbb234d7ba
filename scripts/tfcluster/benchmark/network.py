"""Training under each network profile (compose.network.yaml), for `scripts/benchmark --network`.

The default training, two workers, each profile applied by compose.network.yaml; the figure is
worker 0's training program as its launcher reports it, against the lan profile's.
"""

import re
import statistics
import time

from tfcluster.benchmark.cases import PROGRAM_USED, project
from tfcluster.paths import ROOT
from trainer.contract.shaping import PROFILE_NAMES

# compose.network.yaml's profiles (TF_NETWORK_PROFILE), lan first: every other is reported against it.
NETWORK_PROFILES = PROFILE_NAMES
# What worker 0's shaper measured before training, as the verifier's log relays it.
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
    used, measured = PROGRAM_USED.search(log), _MEASURED.search(result.stdout)
    if result.returncode != 0 or not used or not measured:
        raise RuntimeError(f"the {profile} run failed (exit {result.returncode}):\n{result.stdout}")
    return float(used.group(1)), measured.group(1)


def network_table(runs: int, steps: int) -> str:
    """docs/network-benchmark.md's body, from `runs` runs of every profile with `steps` steps an epoch."""
    seconds, measured = measure_profiles(runs, steps)
    medians = {profile: statistics.median(values) for profile, values in seconds.items()}
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return render(medians, measured, runs=runs, steps=steps, when=when)


def measure_profiles(runs: int, steps: int) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Every profile's training seconds, run by run, and its shaper's measurements (the last run's)."""
    seconds: dict[str, list[float]] = {profile: [] for profile in NETWORK_PROFILES}
    measured: dict[str, str] = {}
    for run in range(runs):
        for profile in NETWORK_PROFILES:  # Alternating, as the other cases.
            used, measured[profile] = network_run(profile, steps)
            seconds[profile].append(used)
        print(f"run {run + 1}/{runs}: " + "  ".join(f"{p} {seconds[p][-1]:.1f}s" for p in NETWORK_PROFILES), flush=True)
    return seconds, measured


def render(medians: dict[str, float], measured: dict[str, str], *, runs: int, steps: int, when: str) -> str:
    """The table of every profile's median against lan's, with what its shaper measured."""
    lines = [
        f"Medians of {runs} alternating runs, {when}: the default",
        f"training with {steps} steps an epoch ({3 * steps} steps), two workers, each profile applied by",
        "compose.network.yaml. Time: worker 0's training program, from its start (TensorFlow's import",
        "included) to its exit, as its launcher reports it. Measured: worker 0's shaper, before training.",
        "",
        "| profile | training time | vs lan | measured before training (worker 0 to worker 1) |",
        "|---|---|---|---|",
    ]
    for profile in NETWORK_PROFILES:
        ratio = medians[profile] / medians["lan"]
        # The shaper's line is "worker-0: network ...": the table has the part after the name.
        lines.append(
            f"| {profile} | {medians[profile]:.1f} s | {ratio:.2f} x | {measured[profile].split(': ', 1)[1]} |"
        )
    return "\n".join(lines) + "\n"

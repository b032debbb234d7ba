"""What the run's report costs a run, for `scripts/benchmark --report` (tfcluster.commands.benchmark).

Each round is one real `scripts/run` of the tutorial's two workers to its verdict, then the
report's step again on the run's stopped containers, as the run does it (tfcluster/report/: the
containers' states and timed logs kept, the page written), timed in this process; with the page's
size. Every round is reported, against the target: under 0.3 s a run.
"""

import os
import statistics
import subprocess
import time

from tfcluster import Cluster, report
from tfcluster.cluster import runs
from tfcluster.paths import ROOT

TARGET = 0.3
PROJECT = "tfc-bench"
RUN_BOUND = 300  # Seconds: a run that takes longer is a hang.


def measure(rounds: int) -> dict:
    found = []
    try:
        for round_ in range(1, rounds + 1):
            ran = subprocess.run(
                [str(ROOT / "scripts" / "run"), "--name", PROJECT],
                cwd=ROOT,
                env=dict(os.environ),
                capture_output=True,
                text=True,
                timeout=RUN_BOUND,
                check=False,
            )
            folder = ROOT / runs.folder_of(PROJECT)
            started = time.perf_counter()
            report.keep(folder, PROJECT)
            kept = time.perf_counter()
            page = report.write(folder)
            written = time.perf_counter()
            found.append(
                {
                    "round": round_,
                    "status": ran.returncode,
                    "keep_seconds": round(kept - started, 4),
                    "write_seconds": round(written - kept, 4),
                    "seconds": round(written - started, 4),
                    "bytes": page.stat().st_size,
                }
            )
            print(f"report benchmark: round {round_}/{rounds}: {found[-1]}", flush=True)
    finally:
        Cluster(name=PROJECT).down()  # Its containers and its folder.
    return {"when": time.strftime("%Y-%m-%d %H:%M"), "target_seconds": TARGET, "rounds": found}


def table(result: dict) -> str:
    rows = result["rounds"]
    lines = [
        f"Measured {result['when']} by `scripts/benchmark --report`: each round a real `scripts/run` "
        "of two workers, then the report's step on its stopped containers (their states and timed "
        f"logs kept, the page written), timed. Target: under {result['target_seconds']} s a run.",
        "",
        "| round | run's exit | keep (s) | write (s) | total (s) | page (KB) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['round']} | {r['status']} | {r['keep_seconds']:.3f} | {r['write_seconds']:.3f} | "
        f"{r['seconds']:.3f} | {r['bytes'] / 1024:.0f} |"
        for r in rows
    ]
    totals = [r["seconds"] for r in rows]
    under = sum(1 for seconds in totals if seconds < result["target_seconds"])
    lines += [
        "",
        f"Median {statistics.median(totals):.3f} s, most {max(totals):.3f} s; {under} of {len(rows)} under the target.",
    ]
    return "\n".join(lines) + "\n"

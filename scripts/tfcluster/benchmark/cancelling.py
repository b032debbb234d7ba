"""How long a cancelled CI step takes to leave nothing behind, for `scripts/benchmark --cancel`
(tfcluster.commands.benchmark).

Each round is one real `scripts/ci-run` of the built-in trainer for 300 epochs, as the Compose
project tfc-bench, signalled once its second epoch has begun, as a runner cancels a job: SIGINT
(GitHub's first), SIGTERM (GitLab's docker executor, GitHub's second), SIGHUP (some runners), or
SIGKILL of its whole tree (a runner that died, or a budget that ran out), after which the next
job's start (`tfcluster.cluster.orphans.remove`, as scripts/ci-run does it) removes what is left.
Timed: from the signal to the step's end, and to the moment no container of its project is left
(the step's own clean-up, or the next job's removal). Every round is reported, against GitHub's
budget: its SIGTERM comes 7.5 s after its SIGINT.
"""

import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tfcluster import Cluster
from tfcluster.cluster import orphans
from tfcluster.paths import ROOT

PROJECT = "tfc-bench"
BUDGET = 7.5  # GitHub's SIGTERM, that long after its SIGINT.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)
TRAINING = re.compile(r"worker-0-1 +\| train \| epoch: +2/")
BOUND = 300  # Seconds: a start, or an end, that takes longer is a hang.


def measure(rounds: int) -> dict:
    found = []
    try:
        for round_ in range(1, rounds + 1):
            for signal_number in SIGNALS:
                found.append({"round": round_, "signal": signal_number.name, **_one(signal_number)})
                print(f"cancel benchmark: {found[-1]}", flush=True)
    finally:
        Cluster(name=PROJECT).down()
    return {"when": time.strftime("%Y-%m-%d %H:%M"), "budget_seconds": BUDGET, "rounds": found}


def _one(signal_number: signal.Signals) -> dict:
    with tempfile.TemporaryDirectory(prefix="tfcluster-cancel-") as folder:
        return _signalled(signal_number, Path(folder) / "verdict.xml")


def _signalled(signal_number: signal.Signals, junit: Path) -> dict:
    step = subprocess.Popen(
        [str(ROOT / "scripts" / "ci-run")],
        cwd=ROOT,
        env={**os.environ, "COMPOSE_PROJECT_NAME": PROJECT, "TRAIN_EPOCHS": "300", "TFCLUSTER_CI_JUNIT": str(junit)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # As a runner's step: its tree can be killed whole.
    )
    try:
        _wait_for_training(step)
        signalled = time.monotonic()
        if signal_number == signal.SIGKILL:
            subprocess.run(["pkill", "-KILL", "--session", str(step.pid)], check=False)
        else:
            step.send_signal(signal_number)
        status = step.wait(timeout=BOUND)
        ended = time.monotonic() - signalled
        left = len(_containers())
        removed_in = None
        if left:  # What the next job's start finds and removes.
            started = time.monotonic()
            orphans.remove()
            removed_in = time.monotonic() - started
        gone = time.monotonic() - signalled
        return {
            "status": status,
            "ended_seconds": round(ended, 2),
            "left_containers": left,
            "next_job_removal_seconds": None if removed_in is None else round(removed_in, 2),
            "nothing_left_seconds": round(gone, 2) if not _containers() else None,
        }
    finally:
        if step.poll() is None:
            subprocess.run(["pkill", "-KILL", "--session", str(step.pid)], check=False)
            step.wait()


def _wait_for_training(step: subprocess.Popen) -> None:
    deadline = time.monotonic() + BOUND
    for line in step.stdout:
        if TRAINING.search(line):
            return
        if time.monotonic() > deadline:
            break
    raise RuntimeError("scripts/ci-run never reached its second epoch")


def _containers() -> list[str]:
    listed = subprocess.run(
        ["docker", "ps", "--all", "--quiet", "--filter", f"label=com.docker.compose.project={PROJECT}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return listed.stdout.split()


def table(result: dict) -> str:
    rows = result["rounds"]
    lines = [
        f"Measured {result['when']} by `scripts/benchmark --cancel`: each round a real `scripts/ci-run` of "
        "300 epochs, signalled in its second epoch as a runner cancels a job; SIGKILL is of the step's whole "
        "tree, and then the next job's start removes what it left (`ci-run: removed ...`). GitHub's budget: "
        f"its SIGTERM comes {result['budget_seconds']} s after its SIGINT. After a SIGKILL the next job's start "
        "is played at once: on a runner, what the killed step left trains on until the next job starts.",
        "",
        "| round | signal | step's exit | step ended (s) | containers it left | next job removed them in (s) "
        "| nothing left after (s) |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        removal = "" if r["next_job_removal_seconds"] is None else f"{r['next_job_removal_seconds']:.2f}"
        nothing = "never" if r["nothing_left_seconds"] is None else f"{r['nothing_left_seconds']:.2f}"
        lines.append(
            f"| {r['round']} | {r['signal']} | {r['status']} | {r['ended_seconds']:.2f} | {r['left_containers']} "
            f"| {removal} | {nothing} |"
        )
    handled = [r["nothing_left_seconds"] for r in rows if r["signal"] != "SIGKILL" and r["nothing_left_seconds"]]
    if handled:
        within = sum(1 for seconds in handled if seconds < result["budget_seconds"])
        lines += [
            "",
            f"Signals the step handles: nothing left after at most {max(handled):.2f} s; "
            f"{within} of {len(handled)} within GitHub's {result['budget_seconds']} s.",
        ]
    return "\n".join(lines) + "\n"

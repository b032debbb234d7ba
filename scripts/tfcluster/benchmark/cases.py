"""The benchmark's timed cases: each runs one thing as its user would, and returns its seconds.

The tutorial's bare processes, `scripts/run`, Compose round trips (N workers, or every container
running `python -c pass`), the all-reduce on both sides, the edit loops, the image's size. They
run as the one Compose project PROJECT, apart from the user's own (tfcluster). measure.py runs
them in turn; network.py and observer.py reuse `project` and `bare_processes`.
"""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tfcluster.cluster import scaling
from tfcluster.cluster.compose import ComposeProject
from tfcluster.paths import ROOT

IMAGE = "tfcluster:latest"
PROJECT = "tfc-bench"
EDITED_FILE = ROOT / "trainer" / "training" / "output.py"
# The tutorial's own program (the seed's), and the figures it prints on both workers.
TUTORIAL = ROOT / "examples" / "tutorial" / "multiworker_train.py"
SEED_FIGURES = "replicas=2 initial_loss=0.7459 final_loss=0.4168 final_accuracy=0.8281"
ALLREDUCE_MIB = (1, 16, 64)
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
# The milestone every run has, whatever it printed: its exit.
EXITED = "scripts/run exited"
# Each launcher's own account of its training program (wall seconds, CPU-seconds): network.py
# reads worker 0's too.
PROGRAM_USED = re.compile(r"training program used ([\d.]+)s, ([\d.]+) CPU-seconds")


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
    return elapsed, {**seen, EXITED: elapsed}


def _tf_config(cluster: list[str], index: int) -> str:
    return json.dumps({"cluster": {"worker": cluster}, "task": {"type": "worker", "index": index}})


# -- Compose itself, and the other cases --------------------------------------------------------------


def compose_run(workers: int = 2, override_text: str = "") -> tuple[float, list[tuple[float, float]]]:
    """The Compose round trip: seconds from `docker compose up` to the verifier's verdict and then
    `down`, with the image built; and each worker's program time and CPU-seconds (its launcher's)."""
    with tempfile.TemporaryDirectory() as directory:
        # compose.yaml is the default cluster; any other size needs an override of it.
        if workers != scaling.DEFAULT_WORKERS:
            override_text = scaling.render(workers, base_file=str(ROOT / "compose.yaml"))
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
    return elapsed, [(float(used), float(cpu)) for used, cpu in PROGRAM_USED.findall(logs)]


def bare_processes(command: list[str], cwd: Path = ROOT, *, environment: dict[str, str] | None = None) -> list[str]:
    """Two processes of `command` with TF_CONFIG on 127.0.0.1 ports, as the tutorial launches them,
    `environment` added to this one's; their outputs, once both have exited 0."""
    cluster = [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(environment or {})}
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

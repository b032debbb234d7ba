"""Warm, cold and bare side by side, for `scripts/benchmark --warm` (tfcluster.commands.benchmark).

One run of this command measures, on the tutorial's own program (a copy of examples/tutorial, so
that editing it touches nothing of the checkout's):
- rounds of three, alternating: the tutorial as two bare processes; `scripts/run --project COPY`
  (cold, the image built); an edit of the copy, then `scripts/run --warm --project COPY` (warm);
  medians, and each side's ratio to the bare processes (targets: warm at most 0.35, cold 1.4);
  the whole comparison three times unless told (--comparisons), each reported, not one chosen;
- then warm runs in a row (20 unless told): none may hang (each has a bound), and each must give
  the cold run's figures and the cold run's final weights, hash for hash;
- with --first-run, last, the first run from a fresh machine state: every image, the build cache,
  the wheelhouse and the Compose plugin removed, then `scripts/run` timed to its verdict, with
  scripts/setup's own account of each step.
"""

import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from tfcluster.benchmark import cases
from tfcluster.paths import ROOT

TARGETS = {"cold": 1.4, "warm": 0.35}
FIRST_RUN_TARGET = 60.0
RUN_BOUND = 300  # Seconds: a run that takes longer is a hang.
FORKED = "forked its program from the warm zygote"
_STATE = re.compile(r"^(worker-\d+)(?:-1)? +\| (\{\"event\":\"observed\".*\"kind\":\"state\".*)$")
_STEP = re.compile(r"^setup \| ((?:installed|downloaded|built).* in \d+ s)$")
_USED = re.compile(r"(worker-\d+)(?:-1)? +\| launcher \| \S+: training program used ([\d.]+)s")


def run_once(arguments: list[str], *, name: str) -> dict:
    """One scripts/run, timed: its seconds, whether it passed, its figures and its final weights."""
    started = time.monotonic()
    result = subprocess.run(
        [str(ROOT / "scripts" / "run"), *arguments],
        cwd=ROOT,
        env={**os.environ, "COMPOSE_PROJECT_NAME": name},
        capture_output=True,
        text=True,
        timeout=RUN_BOUND,
        check=False,
    )
    seconds = time.monotonic() - started
    verdict = next((line for line in result.stdout.splitlines() if "| verdict: " in line), "")
    states: dict[str, list] = {}
    for line in result.stdout.splitlines():
        match = _STATE.match(line)
        if match and '"point":"end"' in match.group(2):
            states[match.group(1)] = json.loads(match.group(2))["variables"]
    return {
        "seconds": seconds,
        "status": result.returncode,
        "passed": result.returncode == 0 and cases.SEED_FIGURES in verdict,
        "verdict": verdict.split("| ", 1)[-1],
        # Worker 0's final state, each variable's name, kind and hash, as one digest (equal ones, equal weights).
        "weights": weights_digest(states.get("worker-0")),
        "forked": result.stdout.count(FORKED),
        # The warm cluster brought up (again) by this run: then it is no warm sample.
        "brought_up": "bringing the warm cluster" in result.stderr,
        "program_seconds": max((float(seconds) for _, seconds in _USED.findall(result.stdout)), default=None),
        "output": result.stdout[-4000:] + result.stderr[-2000:],
    }


def weights_digest(variables: list | None) -> str | None:
    if variables is None:
        return None
    return hashlib.sha256(json.dumps(variables).encode()).hexdigest()[:16]


def measure(runs: int, in_a_row: int, *, first_run: bool, comparisons: int = 3) -> dict:
    """The whole comparison `comparisons` times over (each `runs` rounds of bare, cold and warm),
    then the warm runs in a row, then (with `first_run`) the first run from a fresh machine state."""
    copy = Path(tempfile.mkdtemp(prefix="tfc-bench-warm-")) / "tutorial"
    shutil.copytree(ROOT / "examples" / "tutorial", copy)
    project = ["--project", str(copy), "--command", f"python {cases.TUTORIAL.name}"]
    cold_project = cases.project()
    done: list[dict] = []
    in_a_row_details: list[dict] = []
    try:
        warmed = run_once(["--warm", *project], name=cases.PROJECT)  # Brought up: not a sample.
        _check(warmed, "bringing the warm cluster up")
        for number in range(comparisons):
            done.append(_compare(runs, copy / cases.TUTORIAL.name, project, cold_project, first_round=number * runs))
        reference = done[-1]["details"]["cold"][-1]
        for _ in range(in_a_row):
            warm = run_once(["--warm", *project], name=cases.PROJECT)
            in_a_row_details.append(
                {**_kept(warm), "as_cold": warm["passed"] and warm["weights"] == reference["weights"]}
            )
    finally:
        subprocess.run([str(ROOT / "scripts" / "run"), "--warm-down"], cwd=ROOT, env=_named(), check=False)
        cold_project.down()
        shutil.rmtree(copy.parent, ignore_errors=True)
    result = {"runs": runs, "comparisons": done, "in_a_row": in_a_row_details}
    if first_run:
        result["first_run"] = fresh_first_run()
    return result


def _compare(runs: int, program: Path, project: list[str], cold_project, *, first_round: int) -> dict:
    """One comparison: `runs` rounds of the bare processes, a cold run and an edit with a warm run."""
    samples: dict[str, list[float]] = {"bare": [], "cold": [], "warm": []}
    details: dict[str, list[dict]] = {"cold": [], "warm": []}
    for round_number in range(first_round, first_round + runs):
        samples["bare"].append(cases.time_tutorial())
        cold = run_once(project, name=cases.PROJECT)
        cold_project.down(check=True)
        _check(cold, "the cold run")
        samples["cold"].append(cold["seconds"])
        details["cold"].append(_kept(cold))
        with program.open("a") as file:  # The edit: the program's text changes, its training does not.
            file.write(f"# edited for round {round_number}\n")
        warm = run_once(["--warm", *project], name=cases.PROJECT)
        _check(warm, "the warm run")
        if warm["brought_up"]:  # An image rebuilt meanwhile, say: that run was no warm one.
            raise RuntimeError(f"the warm cluster was brought up again in round {round_number}")
        samples["warm"].append(warm["seconds"])
        details["warm"].append(_kept(warm))
    return {"samples": samples, "details": details}


def fresh_first_run() -> dict:
    """scripts/run from a fresh machine state: nothing of this project's left on the engine or on disk.

    Its containers go first (a warm cluster's would keep their image); Debian's mmdebstrap, which
    scripts/setup installs on the host to build the base image, stays (a fresh machine takes about
    15 s more to install it).
    """
    ours = subprocess.run(
        ["docker", "ps", "--all", "--quiet", "--filter", "label=org.opencontainers.image.title=tfcluster"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if ours:
        subprocess.run(["docker", "rm", "--force", *ours], capture_output=True, check=True)
    subprocess.run(["docker", "system", "prune", "--all", "--force", "--volumes"], capture_output=True, check=True)
    subprocess.run(["docker", "builder", "prune", "--all", "--force"], capture_output=True, check=True)
    for wheel in [*(ROOT / "docker" / "wheels").glob("*.whl"), ROOT / "docker" / "wheels" / ".requirements.sha256"]:
        wheel.unlink(missing_ok=True)
    plugin = Path.home() / ".docker" / "cli-plugins" / "docker-compose"
    plugin.unlink(missing_ok=True)
    shutil.rmtree(ROOT / ".tfcluster", ignore_errors=True)
    started = time.monotonic()
    result = subprocess.run(
        [str(ROOT / "scripts" / "run")], cwd=ROOT, env=_named(), capture_output=True, text=True, timeout=900
    )
    seconds = time.monotonic() - started
    cases.project().down()
    steps = [match.group(1) for line in result.stderr.splitlines() if (match := _STEP.match(line.strip()))]
    return {"seconds": seconds, "status": result.returncode, "steps": steps, "compose_removed": True}


def _named() -> dict[str, str]:
    return {**os.environ, "COMPOSE_PROJECT_NAME": cases.PROJECT}


def _check(run: dict, what: str) -> None:
    if not run["passed"]:
        raise RuntimeError(f"{what} failed (exit {run['status']}): {run['verdict']}\n{run['output']}")


def _kept(run: dict) -> dict:
    return {key: value for key, value in run.items() if key != "output"}


def ratios(comparison: dict) -> dict[str, float]:
    """Each side's median over the bare processes' median, in one comparison."""
    bare = statistics.median(comparison["samples"]["bare"])
    return {side: statistics.median(comparison["samples"][side]) / bare for side in TARGETS}


def table(result: dict) -> str:
    done = result["comparisons"]
    lines = [
        f"`scripts/benchmark --warm`: the whole comparison {len(done)} times, each {result['runs']} rounds "
        "alternating the tutorial as two bare processes, `scripts/run --project` (cold, image built) and an "
        "edit then `--warm`; each comparison's medians, every run's seconds in brackets.",
        "",
        "| comparison | bare | cold | cold / bare | edit, then warm | warm / bare |",
        "|---|---|---|---|---|---|",
    ]
    for number, comparison in enumerate(done, 1):
        samples, ratio = comparison["samples"], ratios(comparison)
        cells = [f"{number}", _seconds(samples["bare"])]
        for side in ("cold", "warm"):
            cells += [_seconds(samples[side]), f"{ratio[side]:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for side in ("cold", "warm"):
        met = sum(ratios(comparison)[side] <= TARGETS[side] for comparison in done)
        lines.append(f"- {side}: at most {TARGETS[side]} times the bare processes: met in {met} of {len(done)}.")
    in_a_row = result["in_a_row"]
    if in_a_row:
        passed = sum(run["passed"] for run in in_a_row)
        as_cold = sum(run["as_cold"] for run in in_a_row)
        forked = sum(run["forked"] == 2 and not run["brought_up"] for run in in_a_row)
        seconds = [run["seconds"] for run in in_a_row]
        lines += [
            "",
            f"{len(in_a_row)} warm runs in a row: {passed} passed with the seed's figures, {as_cold} with the cold "
            f"run's final weights hash for hash, {forked} forked on both workers by the zygotes already up; "
            f"none hung (bound {RUN_BOUND} s); median {statistics.median(seconds):.2f} s, "
            f"slowest {max(seconds):.2f} s.",
        ]
    first = result.get("first_run")
    if first:
        met = "met" if first["seconds"] <= FIRST_RUN_TARGET and first["status"] == 0 else "not met"
        lines += [
            "",
            f"First run from a fresh machine state (no image, build cache, wheel or Compose plugin): "
            f"{first['seconds']:.1f} s to the verdict, exit {first['status']} (target at most "
            f"{FIRST_RUN_TARGET:.0f} s: {met}). scripts/setup's steps: {'; '.join(first['steps'])}.",
        ]
    return "\n".join(lines) + "\n"


def _seconds(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f} s ({', '.join(f'{seconds:.2f}' for seconds in samples)})"

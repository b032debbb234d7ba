"""The benchmark's pure parts: its figures summarized and rendered from samples made up here (no Docker)."""

import json
import math
import subprocess
import sys

import pytest
from tfcluster.benchmark import cases, measure, network, report

from tests.conftest import ROOT


def made_up_samples() -> measure.Samples:
    """One run's worth of figures, as measure_once would have added them."""
    samples = measure.Samples()
    for key, seconds in zip(measure.TIMED, (10.0, 12.0, 11.0, 0.1, 2.1, 8.0, 20.0, 5.0), strict=True):
        samples.seconds[key].append(seconds)
    for index, values in enumerate(samples.milestones.values()):
        values.append(float(index + 1))
    for workers in measure.SCALING_WORKERS:
        samples.verdict[workers].append(10.0 + workers)
        samples.program[workers].append(8.0 + workers)
        samples.cpu[workers].append(6.0)
    for side, figure in (("processes", 1000.0), ("containers", 900.0)):
        for mib in cases.ALLREDUCE_MIB:
            samples.allreduce[side][mib].append(figure)
    return samples


@pytest.fixture
def result() -> dict:
    return measure.summarize(made_up_samples(), 1, size=1_300_000_000, cores=4, when="2024-01-01T00:00:00Z")


def test_ratio_range_is_the_least_and_greatest_of_the_pairs():
    assert measure.ratio_range([2.0, 3.0, 8.0], [1.0, 2.0, 4.0]) == [1.5, 2.0]
    with pytest.raises(ValueError):
        measure.ratio_range([1.0], [1.0, 2.0])  # Unpaired samples are a bug, not a shorter range.


def test_the_summary_keeps_its_json_keys_and_survives_json(result):
    assert list(result) == [
        "event", "when", "runs", "cores", "samples", "medians", "milestones_seconds", "milestones_samples",
        "image_bytes", "scaling", "scaling_samples", "allreduce_mb_per_s", "allreduce_samples", "ratios", "targets",
    ]  # fmt: skip
    assert list(result["scaling"]) == ["1", "2", "4", "8"]
    assert list(result["milestones_seconds"])[-1] == cases.EXITED
    assert report.table(json.loads(json.dumps(result))) == report.table(result)


def test_the_cpu_bound_limit_is_never_less_than_one_worker_alone(result):
    scaling = result["scaling"]
    assert scaling["1"]["cpu_bound_limit_seconds"] == 9.0  # One worker's program: 8 + 1 s.
    assert scaling["2"]["cpu_bound_limit_seconds"] == 9.0  # Not 2 x 6 CPU-s over 4 cores: below one alone.
    assert scaling["8"]["cpu_bound_limit_seconds"] == 8 * 6.0 / 4  # The cores' bound, above it.
    assert scaling["8"]["over_limit"] == pytest.approx(16.0 / 12.0)


def test_the_ratios_are_of_the_medians(result):
    ratios = result["ratios"]
    assert ratios["scripts_run_over_tutorial"] == pytest.approx(1.2)
    assert ratios["scripts_run_over_tutorial_pairs"] == pytest.approx([1.2, 1.2])
    assert ratios["floor_over_tutorial"] == pytest.approx((10.0 + 2.1 - 0.1) / 10.0)
    assert ratios["allreduce_container_over_process"] == pytest.approx({"1": 0.9, "16": 0.9, "64": 0.9})


def test_the_table_says_which_targets_are_met(result):
    text = report.table(result)
    assert text.startswith("Medians of 1 alternating runs on 4 cores, 2024-01-01T00:00:00Z.\n")
    assert "| 1.20 x tutorial (pairs 1.20 to 1.20) | <= 1.40 x: met |" in text
    assert "| 1.10 x tutorial (pairs 1.10 to 1.10) | <= 1.25 x: met |" in text
    assert "| Edit one trainer file, then `scripts/run --dev` (no build) | 5.00 s |  | <= 6 s: met |" in text
    assert "| 20.00 s | rebuild 8.00 s | rebuild <= 10 s: met |" in text
    assert "| 1.30 GB | 0.74 x official 1.76 GB; 0.61 x naive 2.13 GB | <= 1.40 GB: met |" in text
    assert "| All-reduce 64 MiB, containers (processes) | 900 MB/s (1000 MB/s) | 0.90 x processes |" in text
    assert "| 8 | 18.00 s | 16.00 s | 6.00 | 12.00 s | 1.33 x | <= 1.30 x: **not met** |" in text
    assert "as the Compose project\ntfc-bench; each pair" in text
    assert text.endswith("![benchmark chart](benchmark.png)\n")


def test_the_milestones_are_listed_in_the_order_they_came(result):
    result["milestones_seconds"] = {"late": 3.0, "early": 1.0, "middle": 1.5}
    lines = [line for line in report.table(result).splitlines() if line.startswith(("| late", "| early", "| middle"))]
    assert lines == ["| early | 1.00 s | +1.00 s |", "| middle | 1.50 s | +0.50 s |", "| late | 3.00 s | +1.50 s |"]


def test_the_progress_line_has_each_case_of_the_last_run():
    samples = made_up_samples()
    samples.seconds["tutorial_seconds"].append(9.5)  # A second run begun: its figure is the one shown.
    line = measure.progress(samples, 1, 3)
    assert line.startswith("run 2/3: tutorial 9.50s  scripts/run 12.00s  round trip 11.00s  floors 0.10s/2.10s  ")
    assert "rebuild 8.00s  edit-to-verdict 20.00s (--dev 5.00s)  1w 11.00s  2w 12.00s  4w 14.00s  8w 18.00s" in line
    assert line.endswith("all-reduce MB/s 1MiB 1000/900 16MiB 1000/900 64MiB 1000/900")


def test_measure_runs_every_case_and_leaves_a_missing_milestone_nan(monkeypatch, capsys):
    # The cases stand in for Docker and TensorFlow: only the orchestration runs.
    monkeypatch.setattr(cases, "time_tutorial", lambda: 10.0)
    monkeypatch.setattr(cases, "time_scripts_run", lambda: (12.0, {"verdict": 11.0, cases.EXITED: 12.0}))
    monkeypatch.setattr(cases, "compose_run", lambda workers=2, override_text="": (3.0, [(2.0, 1.0)] * workers))
    monkeypatch.setattr(cases, "time_bare_floor", lambda: 0.1)
    monkeypatch.setattr(cases, "time_edit_loops", lambda: (8.0, 20.0, 5.0))
    monkeypatch.setattr(cases, "allreduce_bare", lambda: dict.fromkeys(cases.ALLREDUCE_MIB, 1000.0))
    monkeypatch.setattr(cases, "allreduce_containers", lambda: dict.fromkeys(cases.ALLREDUCE_MIB, 900.0))
    monkeypatch.setattr(cases, "image_bytes", lambda: 1_300_000_000)
    result = measure.measure(2)
    assert capsys.readouterr().out.startswith("run 1/2: tutorial 10.00s  scripts/run 12.00s  round trip 3.00s  ")
    assert result["samples"]["compose_floor_seconds"] == [3.0, 3.0]
    assert result["milestones_seconds"]["verdict"] == 11.0
    assert math.isnan(result["milestones_seconds"]["launchers up"])
    assert result["scaling"]["4"]["cpu_seconds_per_worker"] == 1.0


def test_the_network_table_is_each_case_against_lan_every_run_kept_then_the_cuts():
    def runs(seconds, *steps_ms):
        return [{"seconds": seconds, "step_seconds": ms / 1000, "measured": "rtt of it"} for ms in steps_ms]

    figures = {"none": runs(9.8, 40, 41, 39), "lan": runs(10.0, 41, 42, 40), "wan": runs(25.0, 400, 410, 390)}
    figures |= {"lossy": runs(30.0, 90, 91, 89), "thin": runs(12.0, 50, 51, 49)}
    text = network.render(figures, [10.7, 9.8, 11.2], runs=3, steps=20, when="2024-01-01T00:00:00Z")
    assert text.startswith("Medians of 3 alternating runs, 2024-01-01T00:00:00Z: the default training with 20 steps")
    assert "| lan | 10.0 s | 1.00 x | 10.0, 10.0, 10.0 | 41.0 ms | 1.00 x | 41.0, 42.0, 40.0 | rtt of it |" in text
    assert "| wan | 25.0 s | 2.50 x | 25.0, 25.0, 25.0 | 400.0 ms | 9.76 x | 400.0, 410.0, 390.0 | rtt of it |" in text
    assert "| none | 9.8 s | 0.98 x | 9.8, 9.8, 9.8 | 40.0 ms | 0.98 x |" in text
    assert "(a shaper beside each worker, nothing shaped): +2.0% of the" in text
    assert "as the\nverdict's fault line gives them: 10.7, 9.8, 11.2 (median 10.7 s)." in text


def test_the_step_time_is_timed_by_the_epoch_lines_timestamps():
    log = (
        "2026-12-05T12:00:00.000000000Z launcher | starting\n"
        "2026-12-05T12:00:05.100000000Z train | epoch:   1/3   | step:     20 | loss: 0.7\n"
        "2026-12-05T12:00:06.100000000Z train | epoch:   2/3   | step:     40 | loss: 0.6\n"
        "2026-12-05T12:00:07.1Z train | epoch:   3/3   | step:     60 | loss: 0.5\n"
    )
    assert network.step_seconds(log, 20) == pytest.approx(0.05)  # 2 s over the 40 steps after the first epoch.
    with pytest.raises(ValueError, match="fewer than two epoch lines"):
        network.step_seconds(log.splitlines()[1], 20)


def test_the_command_imports_only_the_standard_library():
    # --help runs under the host's python3, before .venv-bench (and its matplotlib) exists.
    probe = "import sys, tfcluster.commands.benchmark; print(sorted(m for m in sys.modules if 'matplotlib' in m))"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'scripts'}:{ROOT}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout == "[]\n"

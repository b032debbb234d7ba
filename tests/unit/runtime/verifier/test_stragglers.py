"""The slowest worker's line: the rule on both sides of each bound, its plumbing and its rendering."""

import json
import time

import pytest

from tests.observations import records
from trainer.contract.resultsdir import Recorder, WorkerFiles
from trainer.verifier import render, sources
from trainer.verifier.stragglers import BUSY_SHARE, SPREAD, busy_share, slowest_worker
from trainer.verifier.verdict import WorkerReport, judge

FINAL = '{{"event": "final", "worker": {index}, "replicas": {count}, "final_loss": 0.4168}}'


def usage(share: float, *, limit: float = 1.0, wall: float = 100.0) -> dict:
    """A usage record whose busy share is `share`."""
    return {"wall_seconds": wall, "cpu_seconds": share * wall * limit, "cpu_limit": limit}


def line(*shares: float) -> str | None:
    return slowest_worker((f"worker-{index}", usage(share)) for index, share in enumerate(shares))


def test_a_slowed_worker_is_named_with_its_share_its_limit_and_the_others():
    usages = [
        ("worker-0", {"wall_seconds": 40.0, "cpu_seconds": 8.8, "cpu_limit": 2}),  # 11%
        ("worker-1", {"wall_seconds": 40.0, "cpu_seconds": 9.6, "cpu_limit": 0.25}),  # 96%
        ("worker-2", {"wall_seconds": 40.0, "cpu_seconds": 11.2, "cpu_limit": 2}),  # 14%
    ]
    assert slowest_worker(usages) == (
        "slowest worker: worker-1, busy 96% of its 0.25 CPUs against 11-14% on the others "
        "(a synchronous cluster runs at its slowest worker's pace)"
    )


def test_with_two_workers_the_other_is_one_figure_and_one_cpu_is_singular():
    assert slowest_worker([("worker-0", usage(0.9)), ("worker-1", usage(0.1))]) == (
        "slowest worker: worker-0, busy 90% of its 1 CPU against 10% on the other "
        "(a synchronous cluster runs at its slowest worker's pace)"
    )


def test_the_busiest_share_must_reach_the_floor():
    assert line(BUSY_SHARE, 0.1) is not None
    assert line(BUSY_SHARE - 0.01, 0.1) is None


def test_the_busiest_share_must_be_spread_times_the_next():
    assert line(0.9, 0.9 / SPREAD) is not None
    assert line(0.9, 0.9 / SPREAD + 0.01) is None
    # The next busiest counts, not the idlest: two busy workers of three are no single straggler.
    assert line(0.9, 0.85, 0.1) is None
    assert line(0.1, 0.9, 0.3) is not None


@pytest.mark.parametrize("shares", [(0.37, 0.36), (0.31, 0.29, 0.30), (0.95, 0.93), (0.05, 0.01)])
def test_alike_or_idle_workers_have_no_slowest(shares):
    # Alike: a normal run, whether the cores are plenty or too few; idle: tiny shares, large ratios.
    assert line(*shares) is None


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "busy",
        {},
        {"wall_seconds": 10, "cpu_seconds": 5},
        {"wall_seconds": 0, "cpu_seconds": 5, "cpu_limit": 1},
        {"wall_seconds": 10, "cpu_seconds": 5, "cpu_limit": 0},
        {"wall_seconds": 10, "cpu_seconds": -1, "cpu_limit": 1},
        {"wall_seconds": 10, "cpu_seconds": "5", "cpu_limit": 1},
        {"wall_seconds": 10, "cpu_seconds": True, "cpu_limit": 1},
        {"wall_seconds": float("nan"), "cpu_seconds": 5, "cpu_limit": 1},
    ],
)
def test_a_missing_or_malformed_usage_is_left_out(bad):
    assert busy_share(bad) is None
    # Left out, it leaves one worker: no line, rather than a guess.
    assert slowest_worker([("worker-0", usage(0.95)), ("worker-1", bad)]) is None


def test_one_worker_alone_has_no_slowest():
    assert line(0.99) is None
    assert slowest_worker([]) is None


def reports(*shares: float | None) -> list[WorkerReport]:
    return [
        WorkerReport(
            name=f"worker-{index}",
            state="exited",
            exit_code=0,
            log=FINAL.format(index=index, count=len(shares)) + "\n" + records(index, workers=len(shares)),
            usage=None if share is None else usage(share, limit=0.25 if share > 0.5 else 2),
        )
        for index, share in enumerate(shares)
    ]


def test_the_line_is_shown_before_the_summary_and_the_verdict_still_passes():
    verdict = judge(reports(0.12, 0.96), expected_workers=2)
    assert verdict.passed and verdict.problems == ()
    lines = render.table(verdict).splitlines()
    assert lines[-2] == (
        "slowest worker: worker-1, busy 96% of its 0.25 CPUs against 12% on the other "
        "(a synchronous cluster runs at its slowest worker's pace)"
    )
    assert lines[-1].startswith("verdict: PASS: 2 of 2 workers agree")
    record = json.loads(render.as_json(verdict))
    assert record["passed"] is True
    assert record["straggler"] == verdict.straggler


def test_without_a_straggler_nothing_is_shown_and_json_says_null():
    for verdict in (judge(reports(0.30, 0.32), expected_workers=2), judge(reports(None, None), expected_workers=2)):
        assert verdict.straggler is None
        assert "slowest worker" not in render.table(verdict)
        assert json.loads(render.as_json(verdict))["straggler"] is None


def test_a_failed_verdict_still_names_the_straggler_apart_from_its_problems():
    failed = reports(0.12, 0.96)
    failed[0] = WorkerReport(name="worker-0", state="exited", exit_code=3, log="", usage=failed[0].usage)
    verdict = judge(failed, expected_workers=2)
    assert not verdict.passed
    assert verdict.straggler.startswith("slowest worker: worker-1, busy 96%")
    assert all("slowest" not in problem for problem in verdict.problems)


def test_the_results_directory_carries_each_workers_usage_to_its_report(tmp_path):
    recorded = {
        "worker-0": {"wall_seconds": 30.0, "cpu_seconds": 6.0, "cpu_limit": 2},
        "worker-1": {"wall_seconds": 30.0, "cpu_seconds": 7.2, "cpu_limit": 0.25},
    }
    for index, (name, figures) in enumerate(recorded.items()):
        recorder = Recorder(WorkerFiles(tmp_path, name))
        recorder.log_line(FINAL.format(index=index, count=2) + "\n")
        recorder.finish(0, usage=figures)
    found = sources.from_results_dir(tmp_path, list(recorded), timeout=5, start_timeout=5, clock=time.monotonic)
    assert {report.name: report.usage for report in found} == recorded
    assert judge(found, expected_workers=2).straggler.startswith("slowest worker: worker-1, busy 96% of its 0.25 CPUs")


def test_a_saved_log_has_no_usage_and_no_line(tmp_path):
    for index in (0, 1):
        (tmp_path / f"worker-{index}.log").write_text(FINAL.format(index=index, count=2) + "\n")
    found = sources.from_log_files(sorted(tmp_path.glob("*.log")))
    assert [report.usage for report in found] == [None, None]
    assert judge(found, expected_workers=2).straggler is None

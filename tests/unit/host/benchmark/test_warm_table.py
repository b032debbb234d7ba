"""scripts/benchmark --warm's report (tfcluster/benchmark/warm.py): the targets, met or not, from one run's samples."""

from tfcluster.benchmark import warm

RESULT = {
    "runs": 3,
    "samples": {"bare": [6.0, 7.0, 8.0], "cold": [10.0, 10.5, 11.0], "warm": [3.0, 3.4, 3.6]},
    "details": {
        "cold": [],
        "warm": [],
        "in_a_row": [
            {"seconds": 3.5, "passed": True, "as_cold": True, "forked": 2, "brought_up": False},
            {"seconds": 4.5, "passed": True, "as_cold": False, "forked": 2, "brought_up": True},
        ],
    },
    "first_run": {"seconds": 104.7, "status": 0, "steps": ["built in 60 s"]},
}


def test_each_side_is_a_median_and_a_ratio_to_the_bare_processes_against_its_target():
    text = warm.table(RESULT)
    assert "| the tutorial as two bare processes | 7.00 s | 1.00 | | |" in text
    assert (
        "| `scripts/run --project` (cold, image built) | 10.50 s (10.00, 10.50, 11.00) | 1.50 | at most 1.4 | not met |"
        in text
    )
    assert "| edit, then `--warm` | 3.40 s (3.00, 3.40, 3.60) | 0.49 | at most 0.5 | met |" in text


def test_runs_in_a_row_count_only_what_passed_matched_the_cold_weights_and_forked_warm():
    text = warm.table(RESULT)
    assert "2 warm runs in a row: 2 passed with the seed's figures, 1 with the cold run's final weights" in text
    assert "1 forked on both workers by the zygotes already up" in text
    assert "median 4.00 s, slowest 4.50 s" in text
    assert (
        "104.7 s to the verdict, exit 0 (target at most 60 s: not met). scripts/setup's steps: built in 60 s." in text
    )

"""scripts/benchmark --warm's report (tfcluster/benchmark/warm.py): every comparison's figures and targets."""

from tfcluster.benchmark import warm


def comparison(bare, cold, warm_seconds) -> dict:
    return {"samples": {"bare": bare, "cold": cold, "warm": warm_seconds}, "details": {"cold": [], "warm": []}}


RESULT = {
    "runs": 3,
    "comparisons": [
        comparison([6.0, 7.0, 8.0], [10.0, 10.5, 11.0], [3.0, 3.4, 3.6]),
        comparison([6.0, 6.0, 6.0], [8.0, 8.2, 8.4], [1.9, 2.0, 2.1]),
    ],
    "in_a_row": [
        {"seconds": 3.5, "passed": True, "as_cold": True, "forked": 2, "brought_up": False},
        {"seconds": 4.5, "passed": True, "as_cold": False, "forked": 2, "brought_up": True},
    ],
    "first_run": {"seconds": 104.7, "status": 0, "steps": ["built in 60 s"]},
}


def test_every_comparison_is_a_row_of_medians_each_runs_seconds_and_ratios_to_the_bare_processes():
    text = warm.table(RESULT)
    assert "the whole comparison 2 times, each 3 rounds" in text
    assert (
        "| 1 | 7.00 s (6.00, 7.00, 8.00) | 10.50 s (10.00, 10.50, 11.00) | 1.50 | 3.40 s (3.00, 3.40, 3.60) | 0.49 |"
        in text
    )
    assert (
        "| 2 | 6.00 s (6.00, 6.00, 6.00) | 8.20 s (8.00, 8.20, 8.40) | 1.37 | 2.00 s (1.90, 2.00, 2.10) | 0.33 |"
        in text
    )


def test_each_target_says_in_how_many_comparisons_it_was_met():
    text = warm.table(RESULT)
    assert "- cold: at most 1.4 times the bare processes: met in 1 of 2." in text
    assert "- warm: at most 0.35 times the bare processes: met in 1 of 2." in text


def test_runs_in_a_row_count_only_what_passed_matched_the_cold_weights_and_forked_warm():
    text = warm.table(RESULT)
    assert "2 warm runs in a row: 2 passed with the seed's figures, 1 with the cold run's final weights" in text
    assert "1 forked on both workers by the zygotes already up" in text
    assert "median 4.00 s, slowest 4.50 s" in text
    assert (
        "104.7 s to the verdict, exit 0 (target at most 60 s: not met). scripts/setup's steps: built in 60 s." in text
    )

"""A run's end as data (tfcluster/cluster/result.py): assert_synchronized() and its lines."""

import pytest
from tfcluster.cluster.result import Run

PROVEN = ["state: bitwise identical on 2 of 2 workers at 5 points, from checkpoint 1 (step 10) to the end"]
DIFFERS = "model state differs at the end (step 12): worker-1 differs from worker-0 in 5 of 14 compared variables"


def verdict(passed: bool, proven=(), problems=()) -> dict:
    workers = [{"name": f"worker-{i}", "status": "exited 0", "metrics": {}, "problem": None} for i in range(2)]
    synchronization = {"differences": [], "proven": list(proven)}
    return {"passed": passed, "expected_workers": 2, "workers": workers, "synchronization": synchronization,
            "problems": list(problems)}  # fmt: skip


def test_a_pass_with_its_states_proven_identical_is_synchronized():
    run = Run(0, True, verdict(True, PROVEN), name="tfc-x")
    run.assert_synchronized()
    assert run.verdict_lines() == [*PROVEN, "verdict: PASS: 2 of 2 workers agree"]


def test_a_failure_raises_with_the_verdicts_own_lines():
    run = Run(7, True, verdict(False, problems=[DIFFERS]), name="tfc-x")
    with pytest.raises(AssertionError) as raised:
        run.assert_synchronized()
    assert str(raised.value) == (
        "the workers did not train in sync, exit status 7 (Compose project tfc-x):\n"
        f"verdict: FAIL: 1 problem(s)\n  - {DIFFERS}"
    )


def test_a_failure_names_the_runs_report_where_it_has_one():
    run = Run(7, True, verdict(False, problems=[DIFFERS]), name="tfc-x", report="/tmp/x/report.html")
    with pytest.raises(AssertionError) as raised:
        run.assert_synchronized()
    assert str(raised.value).splitlines()[-2:] == [f"  - {DIFFERS}", "report: /tmp/x/report.html"]


def test_a_pass_that_compared_no_model_state_proves_nothing():
    with pytest.raises(AssertionError, match="the verifier passed the run without comparing any model state"):
        Run(0, True, verdict(True)).assert_synchronized()


def test_a_run_that_ended_before_a_verdict_says_how_it_ended():
    with pytest.raises(AssertionError, match="exit status 130 before the verifier gave a verdict"):
        Run(130, True, None).assert_synchronized()


def test_the_data_is_the_run_again():
    run = Run(7, True, verdict(False, problems=[DIFFERS]), {"worker-0": "log"}, "tfc-x")
    assert Run(**run.as_data()) == run

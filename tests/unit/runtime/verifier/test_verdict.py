import json
import xml.etree.ElementTree as ElementTree

from tests.observations import records
from trainer.verifier import render
from trainer.verifier.verdict import WorkerReport, judge

GOOD = (
    '{{"event": "final", "worker": {index}, "workers": 2, "replicas": 2, '
    '"final_loss": {loss}, "final_accuracy": 0.828125}}'
)


def report(index, *, state="exited", exit_code=0, loss=0.4167739450931549, log=None, workers=2, observed=None):
    """A worker's report; its log ends with the observer's records (`observed`, else a synchronized run's)."""
    text = GOOD.format(index=index, loss=loss) if log is None else log
    log = f"{text}\n{records(index, workers=workers) if observed is None else observed}"
    return WorkerReport(name=f"worker-{index}", state=state, exit_code=exit_code, log=log)


def test_agreeing_workers_pass():
    verdict = judge([report(0), report(1)], expected_workers=2)
    assert verdict.passed
    assert verdict.metrics["final_loss"] == 0.4167739450931549
    assert render.summary(verdict).startswith("verdict: PASS: 2 of 2 workers agree: replicas=2 final_loss=0.4168")


def test_a_differing_metric_is_named_with_each_workers_value():
    verdict = judge([report(0), report(1, loss=0.4170)], expected_workers=2)
    assert not verdict.passed
    assert verdict.problems == ("final_loss differs: worker-0=0.4168 worker-1=0.4170",)


def test_a_difference_hidden_by_four_decimals_is_shown_in_full():
    verdict = judge([report(0, loss=0.41677), report(1, loss=0.41678)], expected_workers=2)
    assert verdict.problems == ("final_loss differs: worker-0=0.41677 worker-1=0.41678",)


def test_tolerance_accepts_small_differences_only():
    assert judge([report(0, loss=0.41677), report(1, loss=0.41678)], expected_workers=2, tolerance=1e-4).passed
    assert not judge([report(0, loss=0.4), report(1, loss=0.5)], expected_workers=2, tolerance=1e-4).passed


def test_each_kind_of_failed_worker_is_named():
    reports = [
        report(0, exit_code=3, log="trainer: training check failed: final_accuracy (0.5000) is not above 0.75"),
        report(1, state="missing", exit_code=None, log=""),
        report(2, state="killed", exit_code=None, log="train | epoch: 1"),
        report(3, state="running", exit_code=None, log=""),
        report(4, log="it printed nothing useful", observed=""),
        # It printed its own replicas, which the observer's record of its strategy contradicts.
        report(
            5,
            log='{"event": "final", "replicas": 6, "final_loss": 0.4167739450931549}',
            observed=records(5, workers=6, replicas=1),
        ),
    ]
    problems = judge(reports, expected_workers=6).problems
    assert problems == (
        "worker-0: exited 3: trainer: training check failed: final_accuracy (0.5000) is not above 0.75",
        "worker-1: missing: it never started (no launcher of that name reported)",
        "worker-2: killed without an exit status (SIGKILL or out of memory); last line: train | epoch: 1",
        "worker-3: still running when the verifier's timeout ran out",
        "worker-4: no record of its model state: the observer recorded nothing (its program did not import "
        "TensorFlow, or ran outside this harness's image and launcher)",
        "worker-5: replicas=1, expected 6: its MultiWorkerMirroredStrategy had 1 replica(s) in sync",
    )


def test_a_program_that_prints_nothing_of_its_own_passes_on_its_recorded_state():
    reports = [report(index, log="Epoch 1/1", workers=3) for index in range(3)]
    verdict = judge(reports, expected_workers=3)
    assert verdict.passed, verdict.problems
    assert [worker.metrics for worker in verdict.workers] == [{"replicas": 3}] * 3


def test_fewer_workers_than_expected_fail():
    verdict = judge([report(0), report(1)], expected_workers=3)
    assert not verdict.passed
    assert "only 2 of 3 expected workers reported" in verdict.problems[-1]


def test_a_metric_only_some_workers_report_fails():
    other = '{"event": "final", "worker": 1, "workers": 2, "replicas": 2, "final_loss": 0.4167739450931549}'
    verdict = judge([report(0), report(1, log=other)], expected_workers=2)
    assert verdict.problems == ("final_accuracy missing on worker-1",)


def test_outputs_for_programs_and_ci_carry_the_same_verdict():
    verdict = judge([report(0), report(1, exit_code=5, log="UnavailableError: worker-0 lost")], expected_workers=2)
    record = json.loads(render.as_json(verdict))
    assert record["passed"] is False
    assert record["problems"] == ["worker-1: exited 5: UnavailableError: worker-0 lost"]
    suite = ElementTree.fromstring(render.junit(verdict))
    assert suite.get("tests") == "4"  # Two workers, their model states, their metrics.
    assert suite.get("failures") == "1"
    failures = [case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None]
    assert failures == ["worker-1"]
    assert "worker-1" in render.table(verdict)


LOST_PEER = "lost peer(s) worker-1 (no heartbeat for 10s): training program exited 1"


def test_a_workers_status_reason_wins_over_the_words_of_its_log():
    log = "train | epoch:   1/3\ntensorflow.python.framework.errors_impl.UnavailableError: socket closed\n"
    failed = WorkerReport(name="worker-0", state="exited", exit_code=5, log=log, reason=LOST_PEER)
    verdict = judge([failed, report(1)], expected_workers=2)
    assert verdict.problems == (f"worker-0: exited 5: {LOST_PEER}",)
    assert verdict.workers[0].status == "exited 5"


def test_without_a_status_reason_the_trainers_failed_event_wins_over_the_words_of_its_log():
    reason = "trainer: training check failed: final_accuracy (0.8281) is not above 0.99"
    log = "\n".join(
        [
            json.dumps({"event": "failed", "exit_code": 3, "reason": reason}),
            "trainer: some other line that mentions an error",
            "launcher | worker-0:12345: training program used 7.2s, 9.1 CPU-seconds, peak memory 542 MiB",
        ]
    )
    verdict = judge([report(0, exit_code=3, log=log), report(1)], expected_workers=2)
    assert verdict.problems == (f"worker-0: exited 3: {reason}",)


def test_a_failed_event_of_another_exit_code_is_not_the_reason():
    # An earlier run's failure, or one the launcher overruled: the log's own words say more.
    log = "\n".join(
        [
            json.dumps({"event": "failed", "exit_code": 2, "reason": "trainer: config error: earlier"}),
            "launcher | worker-0:12345: run deadline of 60s exceeded; stopping the training program",
        ]
    )
    verdict = judge([report(0, exit_code=6, log=log), report(1)], expected_workers=2)
    assert verdict.problems == (
        "worker-0: exited 6: launcher | worker-0:12345: run deadline of 60s exceeded; stopping the training program",
    )


def test_a_status_reason_is_only_read_for_a_failed_exit():
    passed = WorkerReport(name="worker-0", state="exited", exit_code=0, log=report(0).log, reason="finished")
    assert judge([passed, report(1)], expected_workers=2).passed


def test_a_failed_worker_without_a_better_reason_shows_its_exception_line_not_what_it_printed_after():
    log = (
        "Traceback (most recent call last):\n"
        '  File "/user/train.py", line 9, in <module>\n'
        "ValueError: bad batch:\n"
        "  0: <tf.Tensor: shape=(64, 28, 28), dtype=float32, numpy=\n"
        "array([[[0., 0., 0., ..., 0., 0., 0.]]], dtype=float32)>\n"
        "launcher | worker-0:12345: training program used 7.2s, 9.1 CPU-seconds, peak memory 542 MiB\n"
    )
    verdict = judge([report(0, exit_code=1, log=log), report(1)], expected_workers=2)
    assert verdict.problems == ("worker-0: exited 1: ValueError: bad batch:",)
    saved = judge([report(0, state="log", exit_code=None, log=log)], expected_workers=1)
    assert saved.problems == ("worker-0: no final metrics in its log, which ends in ValueError: bad batch:",)


def test_a_reason_from_a_log_is_never_longer_than_one_short_line():
    log = "trainer: training check failed: " + "x" * 1000
    problem = judge([report(0, exit_code=3, log=log), report(1)], expected_workers=2).problems[0]
    assert problem.startswith("worker-0: exited 3: trainer: training check failed: xxx")
    assert problem.endswith("…")
    assert len(problem) == len("worker-0: exited 3: ") + 200

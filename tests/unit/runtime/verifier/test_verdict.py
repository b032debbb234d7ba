import json
import xml.etree.ElementTree as ElementTree

from tests.observations import records
from trainer.verifier import render
from trainer.verifier.recovery import Recovery
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
    assert suite.get("tests") == "5"  # Two workers, their model states, their data, their metrics.
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


# -- the failure that started it comes first ---------------------------------------------------------
# Logs as workers print them (trainer/launcher/postmortem.py's lost-peer line, the `failed` event the
# launcher prints with it), built by hand.

USAGE = "launcher | worker-{index}:12345: training program used 9.3s, 11.2 CPU-seconds, peak memory 610 MiB"
# What TensorFlow raises in a worker whose peer is gone: not the program's own error.
PEER_GONE = (
    "Traceback (most recent call last):\n"
    '  File "/app/trainer/training/loop.py", line 64, in train\n'
    "tensorflow.python.framework.errors_impl.UnavailableError: Collective ops is aborted by: Error reported from "
    "/job:worker/task:{peer}: The following tasks are unhealthy (stopped sending heartbeats):\n"
    "/job:worker/replica:0/task:{peer}\n"
    "\t [[{{{{node CollectiveReduceV2}}}}]] [Op:__inference_train_step_1139]\n"
)
# TensorFlow's custom-loop tutorial under Keras 3: every worker raises it at the end of its first epoch.
RESET_STATES = (
    "Traceback (most recent call last):\n"
    '  File "/project/main.py", line 107, in <module>\n'
    "    train_accuracy.reset_states()\n"
    "AttributeError: 'BinaryAccuracy' object has no attribute 'reset_states'\n"
)
# A program's own check, tf.debugging.assert_greater, failing on worker-1 alone.
ASSERT_GREATER = (
    "Traceback (most recent call last):\n"
    '  File "/project/train.py", line 41, in <module>\n'
    '    tf.debugging.assert_greater(steps, 0, message="worker-1 got no batches")\n'
    "tensorflow.python.framework.errors_impl.InvalidArgumentError: worker-1 got no batches\n"
    "Condition x > y did not hold.\n"
)


def lost_peer_line(index, lost):
    return f"launcher | worker-{index}:12345: training program exited 1 after losing peer(s): {lost}"


def exited(index, exit_code, log, *, lost=None, workers=2):
    """A worker that failed, as a live run's results directory reports it: with its launcher's reason
    (and the `failed` event with it) when it lost a peer, `lost` naming whom."""
    log = f"train | epoch:   1/3 | step:      4 | loss: 0.6931\n{log}{USAGE.format(index=index)}\n"
    reason = lost_peer_line(index, lost) if lost else None
    if reason:
        log += f"{reason}\n{json.dumps({'event': 'failed', 'exit_code': exit_code, 'reason': reason})}\n"
    log += records(index, workers=workers)
    return WorkerReport(name=f"worker-{index}", state="exited", exit_code=exit_code, log=log, reason=reason)


def test_every_worker_raising_the_same_error_is_one_problem_naming_them_all():
    # worker-0 raised too, but ended after worker-1 had: its launcher exited 5 naming worker-1.
    reports = [exited(0, 5, RESET_STATES, lost="worker-1:12345 (exited 1)"), exited(1, 1, RESET_STATES)]
    verdict = judge(reports, expected_workers=2)
    assert verdict.problems == (
        "every worker (worker-0, worker-1) raised the same error: "
        "AttributeError: 'BinaryAccuracy' object has no attribute 'reset_states'",
    )
    assert render.summary(verdict) == "verdict: FAIL: 1 problem(s)"
    # Each worker's own account (the JSON record's, JUnit's) still says what it did.
    assert [worker.problem for worker in verdict.workers] == [
        "exited 5: AttributeError: 'BinaryAccuracy' object has no attribute 'reset_states'; "
        "it also lost peer(s) worker-1:12345 (exited 1)",
        "exited 1: AttributeError: 'BinaryAccuracy' object has no attribute 'reset_states'",
    ]


def test_the_same_error_is_the_same_whatever_worker_it_names_and_some_of_the_workers_are_counted():
    def read_only(index):
        return (
            "Traceback (most recent call last):\n"
            '  File "/project/train.py", line 12, in <module>\n'
            f"OSError: [Errno 30] Read-only file system: '/project/out/worker-{index}'\n"
        )

    reports = [exited(index, 1, read_only(index), workers=3) for index in range(3)]
    assert judge(reports, expected_workers=3).problems == (
        "every worker (worker-0, worker-1, worker-2) raised the same error: "
        "OSError: [Errno 30] Read-only file system: '/project/out/worker-0'",
    )
    # Two raised it, the third only lost them: the two once, then the third.
    reports[1] = exited(1, 5, PEER_GONE.format(peer=0), lost="worker-0:12345 (exited 1)", workers=3)
    assert judge(reports, expected_workers=3).problems == (
        "2 of 3 workers (worker-0, worker-2) raised the same error: "
        "OSError: [Errno 30] Read-only file system: '/project/out/worker-0'",
        f"worker-1: exited 5: {lost_peer_line(1, 'worker-0:12345 (exited 1)')}",
    )


def test_different_errors_are_each_on_their_own_workers_line():
    other = RESET_STATES.replace("BinaryAccuracy", "SparseCategoricalAccuracy")
    problems = judge([exited(0, 1, RESET_STATES), exited(1, 1, other)], expected_workers=2).problems
    assert [problem.split(": ")[0] for problem in problems] == ["worker-0", "worker-1"]


def test_the_worker_that_raised_comes_before_the_one_that_only_lost_it():
    reports = [
        exited(0, 5, PEER_GONE.format(peer=1), lost="worker-1:12345 (exited 1)"),
        exited(1, 1, ASSERT_GREATER),
    ]
    assert judge(reports, expected_workers=2).problems == (
        "worker-1: exited 1: tensorflow.python.framework.errors_impl.InvalidArgumentError: worker-1 got no batches",
        f"worker-0: exited 5: {lost_peer_line(0, 'worker-1:12345 (exited 1)')}",
    )


def test_a_killed_worker_comes_before_the_workers_that_lost_it():
    lost = "worker-2:12345 (name not resolvable (3 heartbeats missed))"
    reports = [
        exited(0, 5, PEER_GONE.format(peer=2), lost=lost, workers=3),
        exited(1, 5, PEER_GONE.format(peer=2), lost=lost, workers=3),
        WorkerReport(
            name="worker-2",
            state="killed",
            exit_code=None,
            log="train | epoch:   6/100000 | step:     24 | loss: 0.1741 | accuracy: 0.9922\n",
        ),
    ]
    assert judge(reports, expected_workers=3).problems == (
        "worker-2: killed without an exit status (SIGKILL or out of memory); "
        "last line: train | epoch:   6/100000 | step:     24 | loss: 0.1741 | accuracy: 0.9922",
        f"worker-0: exited 5: {lost_peer_line(0, lost)}",
        f"worker-1: exited 5: {lost_peer_line(1, lost)}",
    )


def test_a_worker_that_raised_its_own_error_and_lost_a_peer_says_its_error_first():
    value_error = RESET_STATES.replace(
        "AttributeError: 'BinaryAccuracy' object has no attribute 'reset_states'",
        "ValueError: Expected labels of shape (64,), got (32,)",
    )
    reports = [
        exited(0, 5, value_error, lost="worker-1:12345 (exited 1)"),
        exited(1, 1, ASSERT_GREATER),
    ]
    verdict = judge(reports, expected_workers=2)
    # Both raised an error of their own: the one that did not also lose a peer (the earlier, as its
    # peer saw it already exited) first.
    assert verdict.problems == (
        "worker-1: exited 1: tensorflow.python.framework.errors_impl.InvalidArgumentError: worker-1 got no batches",
        "worker-0: exited 5: ValueError: Expected labels of shape (64,), got (32,); "
        "it also lost peer(s) worker-1:12345 (exited 1)",
    )
    # Its peer killed, its own error still comes first on its line.
    killed = WorkerReport(name="worker-1", state="killed", exit_code=None, log="train | epoch: 1")
    assert judge([exited(0, 5, value_error, lost="worker-1:12345 (gone)"), killed], expected_workers=2).problems == (
        "worker-1: killed without an exit status (SIGKILL or out of memory); last line: train | epoch: 1",
        "worker-0: exited 5: ValueError: Expected labels of shape (64,), got (32,); "
        "it also lost peer(s) worker-1:12345 (gone)",
    )


def test_a_worker_whose_program_failed_only_with_its_peer_comes_after_it():
    # Exit 1, its launcher saw no peer lost, but what it raised is TensorFlow's error for one.
    reports = [
        exited(0, 1, PEER_GONE.format(peer=1)),
        WorkerReport(name="worker-1", state="killed", exit_code=None, log="train | epoch: 1"),
    ]
    problems = judge(reports, expected_workers=2).problems
    assert [problem.split(": ")[0] for problem in problems] == ["worker-1", "worker-0"]


def test_a_missing_worker_comes_before_the_worker_it_never_joined():
    never = "launcher | worker-0:12345: peer(s) never joined within the 15s join deadline: worker-1:12345 (...)"
    waited = WorkerReport(name="worker-0", state="exited", exit_code=4, log=f"{never}\n", reason=never)
    missing = WorkerReport(name="worker-1", state="missing", exit_code=None, log="")
    assert judge([waited, missing], expected_workers=2).problems == (
        "worker-1: missing: it never started (no launcher of that name reported)",
        f"worker-0: exited 4: {never}",
    )


def test_the_keepers_problem_stays_first_its_account_names_the_failed_workers_in_order():
    recovery = Recovery(restarts=(), limit=1, problem="exited 8: gave up: worker-1 exited 1, worker-0 exited 5")
    reports = [
        exited(0, 5, PEER_GONE.format(peer=1), lost="worker-1:12345 (exited 1)"),
        exited(1, 1, ASSERT_GREATER),
    ]
    problems = judge(reports, expected_workers=2, recovery=recovery).problems
    assert [problem.split(": ")[0] for problem in problems] == ["keeper", "worker-1", "worker-0"]


def test_links_that_differ_are_shown_as_a_matrix_and_kept_in_the_record(tmp_path):
    from trainer.contract import shaping
    from trainer.verifier import links

    def report(worker, peers):
        described = [{"peer": peer, "rtt_ms": rtt, "profile": profile} for peer, rtt, profile in peers]
        shaping.report_path(str(tmp_path), worker).write_text(json.dumps({"profile": "lan", "links": described}))

    report("worker-0", [("worker-1", 0.12, "lan"), ("worker-2", 51.3, "wan")])
    report("worker-1", [("worker-0", 0.09, "lan"), ("worker-2", 49.8, "wan")])
    found = links.matrix(tmp_path, ["worker-0", "worker-1", "worker-2"])  # worker-2's shaper never reported.
    assert found["worker-0"]["worker-2"] == {"rtt_ms": 51.3, "profile": "wan"} and "worker-2" not in found
    assert links.lines(found) == [
        "links: the round trip each row's worker measured to each column's, and the profile it expected",
        "links     worker-0    worker-1    worker-2",
        "worker-0  -           0.1 ms lan  51.3 ms wan",
        "worker-1  0.1 ms lan  -           49.8 ms wan",
    ]
    # One profile for every link: each worker's network line says it all.
    report("worker-1", [("worker-0", 0.09, "lan"), ("worker-2", 0.1, "lan")])
    report("worker-0", [("worker-1", 0.12, "lan"), ("worker-2", 0.1, "lan")])
    assert links.lines(links.matrix(tmp_path, ["worker-0", "worker-1"])) == []


def test_a_link_with_a_rate_of_its_own_shows_and_keeps_its_measured_throughput(tmp_path):
    from trainer.contract import shaping
    from trainer.verifier import links

    described = [
        {"peer": "worker-0", "rtt_ms": 0.7, "throughput_mbit": 98.4, "profile": "thin out, lan in"},
        {"peer": "worker-1", "rtt_ms": 0.5, "throughput_mbit": None, "profile": "lan"},
    ]
    shaping.report_path(str(tmp_path), "worker-2").write_text(json.dumps({"profile": "lan", "links": described}))
    found = links.matrix(tmp_path, ["worker-2"])
    assert found["worker-2"]["worker-0"] == {"rtt_ms": 0.7, "profile": "thin out, lan in", "throughput_mbit": 98.4}
    assert "throughput_mbit" not in found["worker-2"]["worker-1"]  # No rate: nothing to measure.
    assert links.lines(found)[-1] == "worker-2  0.7 ms 98 Mbit/s thin out, lan in  0.5 ms lan  -"

"""The reason a failed worker's line in the verdict gives: one line, the most telling there is."""

import json

import pytest

from trainer.verifier.reasons import (
    LIMIT,
    caused_by_peer,
    exception_line,
    failure_reason,
    last_error_line,
    lost_peers,
    one_line,
    own_error,
    status_reason,
)

# What a program prints when it dies of an exception whose message goes on for lines.
TRACEBACK = """\
Traceback (most recent call last):
  File "/user/train.py", line 12, in <module>
    main()
  File "/user/train.py", line 9, in main
    raise ValueError(f"bad shape:\\n{tensor}")
ValueError: bad shape:
  0: <tf.Tensor: shape=(64, 28, 28), dtype=float32, numpy=
array([[[0., 0., 0., ..., 0., 0., 0.],
        [0., 0., 0., ..., 0., 0., 0.]]], dtype=float32)>
"""
USAGE = "launcher | worker-0:12345: training program used 7.2s, 9.1 CPU-seconds, peak memory 542 MiB"


def test_one_line_is_the_first_line_that_is_not_blank_cut_with_an_ellipsis():
    assert one_line("\n  first  \nsecond\n") == "first"
    assert one_line("") == ""
    assert one_line("x" * LIMIT) == "x" * LIMIT
    cut = one_line("x" * (LIMIT + 1))
    assert len(cut) == LIMIT
    assert cut.endswith("…")
    assert one_line("word " * 100, limit=None) == ("word " * 100).strip()


def test_a_traceback_gives_its_exception_line_and_only_the_first_line_of_its_message():
    assert exception_line(TRACEBACK) == "ValueError: bad shape:"
    assert last_error_line(TRACEBACK) == "ValueError: bad shape:"
    # Later lines, the launcher's own and those that merely mention an error, do not count over it.
    noisy = TRACEBACK + USAGE + "\nshutting down after an error\n"
    assert last_error_line(noisy) == "ValueError: bad shape:"


def test_a_qualified_exception_and_the_last_of_chained_tracebacks_count():
    chained = (
        "Traceback (most recent call last):\n  File 'a.py', line 1\nKeyError: 'x'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n  File 'a.py', line 3\n"
        "tensorflow.python.framework.errors_impl.UnavailableError: peer gone\n"
    )
    assert exception_line(chained) == "tensorflow.python.framework.errors_impl.UnavailableError: peer gone"
    assert exception_line("Traceback (most recent call last):\n  File 'a.py'\nRuntimeError\n") == "RuntimeError"


def test_without_a_traceback_there_is_no_exception_line():
    assert exception_line("ValueError: printed, not raised\n") is None
    assert exception_line("Traceback (most recent call last):\n  File 'a.py'\nKeyboardInterrupt\n") is None


def test_a_long_exception_message_is_cut():
    log = f"Traceback (most recent call last):\n  File 'a.py'\nValueError: {'x' * 500}\n"
    reason = last_error_line(log)
    assert len(reason) == LIMIT
    assert reason.startswith("ValueError: xxx")
    assert reason.endswith("…")


def test_last_error_line_prefers_an_error():
    log = "start\ntensorflow.python.framework.errors_impl.UnavailableError: peer gone\nshutting down\n"
    assert last_error_line(log) == "tensorflow.python.framework.errors_impl.UnavailableError: peer gone"
    assert last_error_line("one\ntwo\n") == "two"
    assert last_error_line("") == "(no output)"


def test_the_launchers_usage_line_is_never_the_failure_reason():
    log = f"trainer: training check failed: final_accuracy (0.8281) is not above 0.99\n{USAGE}\n"
    assert last_error_line(log) == "trainer: training check failed: final_accuracy (0.8281) is not above 0.99"


def test_a_json_event_is_never_taken_for_a_line_of_prose():
    log = (
        "tensorflow.python.framework.errors_impl.UnavailableError: peer gone\n"
        '{"event": "failed", "exit_code": 3, "reason": "trainer: training check failed: an error"}\n'
        '{"event": "start", "step": 0}\n'
    )
    assert last_error_line(log) == "tensorflow.python.framework.errors_impl.UnavailableError: peer gone"
    # With no prose that looks like a reason, the last line is still the last line.
    assert last_error_line('train | epoch: 1\n{"event": "start", "step": 4}\n') == '{"event": "start", "step": 4}'


def test_a_line_of_json_that_is_no_event_is_still_prose():
    assert last_error_line('{"message": "fatal error in worker"}\nbye\n') == '{"message": "fatal error in worker"}'


def test_a_status_reason_is_one_line_and_whole():
    long = "launcher | worker-0:12345: lost " + ", ".join(f"worker-{n}:12345 (gone)" for n in range(1, 20))
    assert status_reason({"reason": long + "\nmore"}) == long
    assert status_reason({"reason": "  "}) is None
    assert status_reason({}) is None


def test_a_failed_events_reason_is_one_line():
    event = json.dumps({"event": "failed", "exit_code": 3, "reason": "check failed:\n" + "x\n" * 50})
    assert failure_reason(exit_code=3, reason=None, log=event) == "check failed:"


def test_a_known_diagnosis_wins_over_every_other_reason():
    log = "Traceback (most recent call last):\nRuntimeError: Collective ops must be configured at program startup\n"
    lost = "launcher | worker-0:12345: training program exited 1 after losing peer(s): worker-1:12345 (exited 1)"
    reason = failure_reason(exit_code=5, reason=lost, log=log)
    assert reason.startswith("MultiWorkerMirroredStrategy was created after other TensorFlow ops")


def traceback(exception: str) -> str:
    return (
        f'Traceback (most recent call last):\n  File "/project/train.py", line 9, in <module>\n{exception}\n{USAGE}\n'
    )


def test_a_programs_own_error_is_its_exception_or_a_known_failures_advice():
    assert own_error(TRACEBACK) == "ValueError: bad shape:"
    assert own_error(traceback("AttributeError: 'BinaryAccuracy' object has no attribute 'reset_states'")) == (
        "AttributeError: 'BinaryAccuracy' object has no attribute 'reset_states'"
    )
    # A program's own TensorFlow check is its own error, whatever class TensorFlow gives it.
    check = "tensorflow.python.framework.errors_impl.InvalidArgumentError: no batches"
    assert own_error(traceback(check)) == check
    assert own_error(traceback("RuntimeError: Collective ops must be configured at program startup")).startswith(
        "MultiWorkerMirroredStrategy was created after other TensorFlow ops"
    )
    assert own_error("train | epoch: 1\nValueError: printed, not raised\n") is None


@pytest.mark.parametrize(
    "exception",
    [
        "tensorflow.python.framework.errors_impl.UnavailableError: Collective ops is aborted by: failed to connect",
        "tensorflow.python.framework.errors_impl.CancelledError: [_Derived_]Cancelled",
        "tensorflow.python.framework.errors_impl.AbortedError: Collective ops is aborted",
        "tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded",
        # Whatever its class, a message that says the collective was aborted by a peer.
        "tensorflow.python.framework.errors_impl.InternalError: Collective ops is aborted by: Error reported from "
        "/job:worker/task:1",
        "tensorflow.python.framework.errors_impl.UnknownError: Socket closed",
    ],
)
def test_what_tensorflow_raises_when_a_peer_is_gone_is_not_the_programs_own_error(exception):
    assert own_error(traceback(exception)) is None
    assert caused_by_peer(traceback(exception))


def test_a_program_that_raised_its_own_error_or_nothing_did_not_fail_by_a_peer():
    assert not caused_by_peer(TRACEBACK)
    assert not caused_by_peer("train | epoch: 1\n")
    # TensorFlow named an unhealthy peer, without a traceback: the peer's doing.
    unhealthy = "The following tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\n"
    assert caused_by_peer(unhealthy)


def test_the_peers_a_launchers_lost_peer_line_names_are_read_to_show_again():
    after = "launcher | worker-0:12345: training program exited 1 after losing peer(s): worker-1:12345 (exited 1)"
    assert lost_peers(after) == "worker-1:12345 (exited 1)"
    stopped = "launcher | worker-0:12345: stopped: lost peer(s) worker-1:12345 (gone), worker-2:12345 (exited 9: x)"
    assert lost_peers(stopped) == "worker-1:12345 (gone), worker-2:12345 (exited 9: x)"
    assert lost_peers("launcher | worker-0:12345: run deadline of 60s exceeded") is None

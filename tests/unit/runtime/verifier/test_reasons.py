"""The reason a failed worker's line in the verdict gives: one line, the most telling there is."""

import json

from trainer.verifier.reasons import LIMIT, exception_line, failure_reason, last_error_line, one_line, status_reason

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

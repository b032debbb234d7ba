"""Known failures get one line of advice in the verdict, in place of what their logs print."""

import pytest

from trainer.verifier.diagnoses import DIAGNOSES, diagnose
from trainer.verifier.verdict import WorkerReport, judge

# How Keras 3's Model.fit fails under MultiWorkerMirroredStrategy (keras-team/keras#20585), as a
# worker's log shows it: the message prints the per-replica batch, tensors and all.
PER_REPLICA = """\
Traceback (most recent call last):
  File "/user/train.py", line 44, in <module>
    model.fit(dataset, epochs=3, steps_per_epoch=70)
  File "/opt/venv/lib/python3.11/site-packages/keras/src/utils/traceback_utils.py", line 122, in error_handler
    raise e.with_traceback(filtered_tb) from None
  File "/opt/venv/lib/python3.11/site-packages/tensorflow/python/framework/constant_op.py", line 108, in convert
    return ops.EagerTensor(value, ctx.device_name, dtype)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ValueError: Attempt to convert a value (PerReplica:{
  0: <tf.Tensor: shape=(64, 28, 28), dtype=float32, numpy=
array([[[0., 0., 0., ..., 0., 0., 0.],
        [0., 0., 0., ..., 0., 0., 0.]]], dtype=float32)>
}) with an unsupported type (<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor.
launcher | worker-0:12345: training program used 9.8s, 12.0 CPU-seconds, peak memory 610 MiB
"""
KERAS_ADVICE = (
    "Keras 3's Model.fit does not work under MultiWorkerMirroredStrategy (keras-team/keras#20585): "
    "set TF_USE_LEGACY_KERAS=1 (scripts/run --env TF_USE_LEGACY_KERAS=1) to use tf-keras, which the image has"
)
COLLECTIVES = """\
Traceback (most recent call last):
  File "/user/train.py", line 20, in <module>
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
RuntimeError: Collective ops must be configured at program startup
"""

# One log per entry of the table, in the table's order: each entry is tested by a log that shows it.
SAMPLES = [PER_REPLICA, COLLECTIVES]


def test_every_diagnosis_has_a_sample_log_and_one_line_of_advice():
    assert len(SAMPLES) == len(DIAGNOSES)
    for diagnosis, sample in zip(DIAGNOSES, SAMPLES, strict=True):
        assert diagnosis.pattern.search(sample)
        assert diagnose(sample) == diagnosis.advice
        assert "\n" not in diagnosis.advice
        assert len(diagnosis.advice) <= 240


def test_keras_3s_per_replica_error_is_named_with_its_fix():
    assert diagnose(PER_REPLICA) == KERAS_ADVICE


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: Attempt to convert a value (PerReplica:{",
        "}) with an unsupported type (<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor.",
        # The same class under another module path, in another TensorFlow version.
        "TypeError: unsupported type (<class 'tensorflow.distribute.PerReplica'>)",
    ],
)
def test_either_half_of_the_per_replica_error_is_enough(line):
    assert diagnose(f"noise\n{line}\nmore noise\n") == KERAS_ADVICE


def test_other_failures_have_no_diagnosis():
    assert diagnose("") is None
    assert (
        diagnose("ValueError: Attempt to convert a value (None) with an unsupported type (<class 'NoneType'>)") is None
    )
    assert diagnose("train | epoch: 1 | PerReplica values are fine here") is None


def test_the_verdict_shows_the_advice_in_one_line_whatever_the_launcher_said():
    lost = "launcher | worker-1:12345: training program exited 1 after losing peer(s): worker-0:12345 (exited 1)"
    reports = [
        WorkerReport(name="worker-0", state="exited", exit_code=1, log=PER_REPLICA),
        WorkerReport(name="worker-1", state="exited", exit_code=5, log=PER_REPLICA, reason=lost),
    ]
    verdict = judge(reports, expected_workers=2)
    # Both failed the same way: said once, naming both (trainer/verifier/causes.py).
    assert verdict.problems == (f"every worker (worker-0, worker-1) failed the same way: {KERAS_ADVICE}",)
    # Each worker's own line still has the advice first; the peer worker-1 lost comes after it.
    assert [worker.problem for worker in verdict.workers] == [
        f"exited 1: {KERAS_ADVICE}",
        f"exited 5: {KERAS_ADVICE}; it also lost peer(s) worker-0:12345 (exited 1)",
    ]


def test_a_saved_log_without_metrics_shows_the_advice():
    verdict = judge([WorkerReport(name="worker-0", state="log", exit_code=None, log=PER_REPLICA)], expected_workers=1)
    assert verdict.problems == (f"worker-0: no final metrics in its log: {KERAS_ADVICE}",)


# What worker-0 printed when worker-1's program was frozen (SIGSTOP) mid-fit: TensorFlow's
# coordination service noticed before the launcher did, and worker-0's launcher had no reason to give.
UNHEALTHY = (
    "Collective ops is aborted by: Error reported from /job:worker/task:1: "
    "The following tasks are unhealthy (stopped sending heartbeats):\n"
    "/job:worker/replica:0/task:1\n"
    "The tasks have crashed. Check the task logs for an earlier error, or scheduler events "
    "(e.g. preemption, eviction) to debug further.\n"
)


def test_the_peer_tensorflow_found_unhealthy_is_named_where_the_launcher_gave_no_reason():
    report = WorkerReport(name="worker-0", state="exited", exit_code=1, log=UNHEALTHY)
    (outcome,) = judge([report], expected_workers=1).workers
    assert outcome.problem == (
        "exited 1: TensorFlow found worker 1 of the cluster list unhealthy: its program stopped sending "
        "TensorFlow's heartbeats (frozen, stopped or gone); that worker's own line says why"
    )
    # The launcher's own reason, when it has one, names the lost peer better.
    lost = "launcher | worker-0:12345: training program exited 1 after losing peer(s): worker-1:12345 (...)"
    report = WorkerReport(name="worker-0", state="exited", exit_code=5, log=UNHEALTHY, reason=lost)
    (outcome,) = judge([report], expected_workers=1).workers
    assert outcome.problem == f"exited 5: {lost}"

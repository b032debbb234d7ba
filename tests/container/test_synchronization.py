"""The verdict proves synchronization from each worker's model state, for programs that print nothing of ours.

Each program of tests/fixtures/synchronization/ runs unchanged on the cluster through scripts/run,
once as it is (the check passes) and once with its real bug switched on (the check says no):
a per-worker learning rate in a custom loop, a worker-local change to a kernel in `fit`, a model
built outside the strategy's scope, and a program that never all-reduces a gradient (traced, and
run eagerly, where only its traffic tells).

They run on their module's warm cluster (tests/container/conftest.py's warm_run), in an order that
changes TF_USE_LEGACY_KERAS once: each change restarts the warm zygotes under the new key.
"""

import functools
import re

import pytest

from tests.container import conftest
from tests.container.conftest import LEGACY_KERAS, TUTORIAL_FIGURES, problems, verdict_lines
from trainer.contract.exitcodes import ExitCode

run_program = functools.partial(conftest.run_program, folder="tests/fixtures/synchronization")


def test_the_tutorials_custom_loop_passes_on_identical_weights(warm_run):
    result = run_program(warm_run, "custom_loop.py")
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    lines = verdict_lines(result.stdout)
    assert lines[-1] == (
        f"verdict: PASS: 2 of 2 workers agree: {TUTORIAL_FIGURES}; weights identical at 1 point "
        "(14 of 14 trained variables; 14 variables, 1.9 KB)"
    )
    proofs = {line.split(": ", 1)[0]: line for line in lines[:-1] if ": " in line}
    assert proofs["state"].startswith(
        "state: bitwise identical on 2 of 2 workers at 1 point, at the end (step 12): 14 of 14 trained variables; "
    )
    assert proofs["gradients"] == "gradients: all-reduced by every worker's Adam inside strategy.run, 2 replicas"
    traffic = (
        r"traffic: over TensorFlow's connections every worker sent at least ([\d.]+) KB and received at least "
        r"([\d.]+) KB; 12 steps of all-reduce of 644 B of gradients move at least 3.8 KB each way, "
        r"too few to tell from TensorFlow's own coordination \(up to about [\d.]+ KB\): the bytes show the "
        r"workers connected, not that gradients crossed"
    )
    sent, received = re.fullmatch(traffic, proofs["traffic"]).groups()
    assert proofs["data"] == "data: each worker read its own examples: 128 distinct each, none shared, 256 in all"
    assert float(sent) > 3.8 and float(received) > 3.8  # The launchers' heartbeats are not counted.


def test_a_per_worker_learning_rate_fails_naming_the_step_and_the_variables(warm_run):
    result = run_program(warm_run, "custom_loop.py", "--env", "DRIFT=1")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    # The loss and accuracy, all-reduced, agree: only the weights tell.
    assert "final_loss differs" not in result.stdout
    assert problems(result.stdout) == [
        "model state differs at the end (step 12): worker-1 differs from worker-0 in 5 of 14 compared variables: "
        "sequential/dense/kernel, sequential/dense/bias, sequential/dense_1/kernel, sequential/dense_1/bias "
        "(and 1 more)"
    ]


def test_workers_that_apply_their_own_gradients_are_caught_by_how_they_applied_them(warm_run):
    result = run_program(warm_run, "unsynchronized.py")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert problems(result.stdout) == [
        f"worker-{index}: its SGD applied gradients that were never all-reduced: apply_gradients ran outside "
        "strategy.run, where it reduces nothing, and no collective produced them: each worker trained on its "
        "own gradients"
        for index in (0, 1)
    ]
    # Their weights were identical: only the evidence says no.
    assert "model state differs" not in result.stdout


@pytest.mark.parametrize("workers", [2])
def test_workers_that_never_synchronize_eagerly_are_caught_by_their_traffic(warm_run, workers):
    result = run_program(warm_run, "unsynchronized.py", "--workers", str(workers), "--env", "EAGER=1")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    *unproven, problem = problems(result.stdout)
    # Eagerly, how the gradients were reduced cannot be read: not proven, whatever the traffic.
    assert unproven == [
        f"worker-{index}: not proven: its SGD applied gradients eagerly outside strategy.run, where how they were "
        "reduced cannot be read (run the step in strategy.run, or as a tf.function)"
        for index in range(workers)
    ]
    assert problem.startswith(
        "TensorFlow's connections carried less than 12 steps of all-reduce of 1.0 MB of gradients must "
        "move (6.0 MB each way): worker-0 sent "
    ), problem
    assert problem.endswith("the gradients did not cross the network, so the workers never synchronized")
    assert "model state differs" not in result.stdout


def test_a_fit_model_with_batch_normalization_passes_its_moving_statistics_listed_as_local(warm_run):
    result = run_program(warm_run, "fit_batchnorm.py", *LEGACY_KERAS)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    state = next(line for line in verdict_lines(result.stdout) if line.startswith("state: "))
    assert state.startswith(
        "state: bitwise identical on 2 of 2 workers at 4 points, from epoch 1 (step 5) to the end (step 15): "
    )
    assert "local to each worker (ON_READ), not compared: batch_normalization/moving_mean, " in state
    assert "batch_normalization/moving_variance" in state


def test_a_worker_local_change_after_epoch_1_of_fit_fails_naming_that_epoch_and_variable(warm_run):
    result = run_program(warm_run, "fit_batchnorm.py", *LEGACY_KERAS, "--env", "DRIFT=1")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert problems(result.stdout) == [
        "model state differs at epoch 1 (step 5): worker-1 differs from worker-0 in 1 of 13 compared variables: "
        "dense/kernel"
    ]


def test_a_model_built_outside_the_strategys_scope_is_named(warm_run):
    result = run_program(warm_run, "fit_batchnorm.py", *LEGACY_KERAS, "--env", "OUTSIDE_SCOPE=1")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert problems(result.stdout) == [
        f"worker-{index}: 6 trainable variable(s) made outside strategy.scope(), so trained by this worker alone: "
        "dense/kernel, dense/bias, batch_normalization/gamma, batch_normalization/beta (and 2 more)"
        for index in (0, 1)
    ]


def test_tensorflows_keras_tutorial_trains_in_sync_but_fails_on_its_overlapping_shards_until_seeded(warm_run):
    # As TensorFlow publishes it: an unseeded shuffle before the DATA shard, so each worker keeps every
    # other element of its own permutation. The weights agree (the gradients are all-reduced); the data
    # do not: about half of what each read in its first pass over the data, the other read too.
    result = run_program(warm_run, "keras_tutorial.py", *LEGACY_KERAS)
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert '{"event": "final"' not in result.stdout and "worker=0 " not in result.stdout  # Nothing of ours.
    assert "model state differs" not in result.stdout
    [problem] = problems(result.stdout)
    found = re.fullmatch(
        r"worker-0 and worker-1 both read (\d+) of their examples \((\d+)%\) in one pass over the data "
        r"\(the first 1\d of 30 steps\): the input is sharded differently on each worker, or not at all "
        r"\(a shuffle before the shard not seeded alike on every worker, or no \.shard\)",
        problem,
    )
    # Two independent halves of the same 2048: each shares about half of its 1024 with the other.
    assert found and 30 <= int(found[2]) <= 70, problem

    result = run_program(warm_run, "keras_tutorial.py", *LEGACY_KERAS, "--env", "SHUFFLE_SEED=1")
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    lines = verdict_lines(result.stdout)
    assert re.fullmatch(
        r"data: each worker read its own examples: 1024 distinct each, none shared, 2048 in all in one pass over "
        r"the data \(the first 1\d of 30 steps\); 2048 over the run, read again since",
        next(line for line in lines if line.startswith("data: ")),
    ), lines
    assert re.fullmatch(
        r"verdict: PASS: 2 of 2 workers agree: replicas=2 initial_loss=\d\.\d{4} final_loss=\d\.\d{4} "
        r"final_accuracy=\d\.\d{4}; weights identical at 4 points \(13 of 13 trained variables; "
        r"up to 18 variables, 21\.1 MB\)",
        lines[-1],
    ), lines[-1]

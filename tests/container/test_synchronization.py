"""The verdict proves synchronization from each worker's model state, for programs that print nothing of ours.

Each program of tests/fixtures/synchronization/ runs unchanged on the cluster through scripts/run,
once as it is (the check passes) and once with its real bug switched on (the check says no):
a per-worker learning rate in a custom loop, a worker-local change to a kernel in `fit`, a model
built outside the strategy's scope, and a program that never all-reduces a gradient.
"""

import re

import pytest

from trainer.contract.exitcodes import ExitCode

PROGRAMS = ["--project", "tests/fixtures/synchronization"]
LEGACY_KERAS = ["--env", "TF_USE_LEGACY_KERAS=1"]
TUTORIAL_FIGURES = "replicas=2 initial_loss=0.7459 final_loss=0.4168 final_accuracy=0.8281"


def verdict_lines(output: str) -> list[str]:
    return [line.split("| ", 1)[-1] for line in output.splitlines() if line.startswith("verifier-1")]


def problems(output: str) -> list[str]:
    return [line.removeprefix("  - ") for line in verdict_lines(output) if line.startswith("  - ")]


def run_program(scripts_run, program: str, *arguments: str):
    return scripts_run(*PROGRAMS, "--command", f"python {program}", *arguments).finish()


def test_the_tutorials_custom_loop_passes_on_identical_weights(scripts_run):
    result = run_program(scripts_run, "custom_loop.py")
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    lines = verdict_lines(result.stdout)
    assert lines[-1] == (
        f"verdict: PASS: 2 of 2 workers agree: {TUTORIAL_FIGURES}; weights identical at 1 point (14 variables, 1.9 KB)"
    )
    assert lines[-3].startswith("state: bitwise identical on 2 of 2 workers at 1 point, at the end (step 12): ")
    traffic = (
        r"traffic: while training, every worker sent at least ([\d.]+) KB to its peers "
        r"and received at least ([\d.]+) KB"
    )
    sent, received = re.fullmatch(traffic, lines[-2]).groups()
    assert float(sent) > 10 and float(received) > 10  # Twelve steps of all-reduce, not heartbeats alone.


def test_a_per_worker_learning_rate_fails_naming_the_step_and_the_variables(scripts_run):
    result = run_program(scripts_run, "custom_loop.py", "--env", "DRIFT=1")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    # The loss and accuracy, all-reduced, agree: only the weights tell.
    assert "final_loss differs" not in result.stdout
    assert problems(result.stdout) == [
        "model state differs at the end (step 12): worker-1 differs from worker-0 in 5 of 14 compared variables: "
        "sequential/dense/kernel, sequential/dense/bias, sequential/dense_1/kernel, sequential/dense_1/bias "
        "(and 1 more)"
    ]


def test_a_fit_model_with_batch_normalization_passes_its_moving_statistics_listed_as_local(scripts_run):
    result = run_program(scripts_run, "fit_batchnorm.py", *LEGACY_KERAS)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    state = next(line for line in verdict_lines(result.stdout) if line.startswith("state: "))
    assert state.startswith(
        "state: bitwise identical on 2 of 2 workers at 4 points, from epoch 1 (step 5) to the end (step 15): "
    )
    assert "local to each worker (ON_READ), not compared: batch_normalization/moving_mean, " in state
    assert "batch_normalization/moving_variance" in state


def test_a_worker_local_change_after_epoch_1_of_fit_fails_naming_that_epoch_and_variable(scripts_run):
    result = run_program(scripts_run, "fit_batchnorm.py", *LEGACY_KERAS, "--env", "DRIFT=1")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert problems(result.stdout) == [
        "model state differs at epoch 1 (step 5): worker-1 differs from worker-0 in 1 of 13 compared variables: "
        "dense/kernel"
    ]


def test_a_model_built_outside_the_strategys_scope_is_named(scripts_run):
    result = run_program(scripts_run, "fit_batchnorm.py", *LEGACY_KERAS, "--env", "OUTSIDE_SCOPE=1")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert problems(result.stdout) == [
        f"worker-{index}: 6 trainable variable(s) made outside strategy.scope(), so trained by this worker alone: "
        "dense/kernel, dense/bias, batch_normalization/gamma, batch_normalization/beta (and 2 more)"
        for index in (0, 1)
    ]


def test_tensorflows_keras_tutorial_passes_with_its_metrics_taken_from_fit(scripts_run):
    result = run_program(scripts_run, "keras_tutorial.py", *LEGACY_KERAS)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    assert '{"event": "final"' not in result.stdout and "worker=0 " not in result.stdout  # Nothing of ours.
    final = verdict_lines(result.stdout)[-1]
    assert re.match(
        r"verdict: PASS: 2 of 2 workers agree: replicas=2 initial_loss=\d\.\d{4} final_loss=\d\.\d{4} "
        r"final_accuracy=\d\.\d{4}; weights identical at 4 points \(up to 18 variables, 21\.1 MB\)$",
        final,
    ), final


@pytest.mark.parametrize("workers", [2])
def test_workers_that_never_synchronize_are_caught_by_their_traffic(scripts_run, workers):
    result = run_program(scripts_run, "unsynchronized.py", "--workers", str(workers))
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    [problem] = problems(result.stdout)
    assert problem.startswith(
        "the workers exchanged less than one all-reduce of their 1.0 MB of trainable variables while training "
        "(514.0 KB each way): worker-0 sent 1.0 MB and received "
    ), problem
    assert problem.endswith("no gradient crossed the network, so they never synchronized")
    # Their weights were identical: only the traffic says no.
    assert "model state differs" not in result.stdout

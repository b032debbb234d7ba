"""No PASS without evidence: real programs, not written for this harness, each beside its negative control.

Each program of tests/fixtures/evidence/ runs unchanged on the cluster through scripts/run. Each
rule of the verdict's evidence is held here by the bug it exists to catch (tests/fixtures/evidence/README.md):
- a program whose model lives in `main()` and is freed before it exits is judged on its trained
  weights, held alive by the observer: drifting, it fails; in sync, it passes, its trained
  variables counted;
- a small model whose steps never all-reduce: traced (5 s), the step's graph shows no collective
  before the gradients; run eagerly (half a minute), its traffic is too little for its steps;
- checkpoints are matched by step and content: `ModelCheckpoint` on the chief alone beside
  `BackupAndRestore` on every worker is no difference;
- when every worker raised the same error, that error is the first (the only) problem.
Before these rules, every one of these verdicts was wrong: docs/verifier.md, "What a PASS proves".

They run on their module's warm cluster (tests/container/conftest.py's warm_run), in an order that
changes TF_USE_LEGACY_KERAS once: each change restarts the warm zygotes under the new key.
"""

import functools
import json
import re

import pytest

from tests import browser
from tests.container import conftest
from tests.container.conftest import DIFFERING, LEGACY_KERAS, TUTORIAL_FIGURES, report_of, verdict_lines
from trainer.contract.exitcodes import ExitCode

FOLDER = "tests/fixtures/evidence"
run_program = functools.partial(conftest.run_program, folder=FOLDER)

GRADIENTS = "gradients: all-reduced by every worker's Adam inside strategy.run, 2 replicas"


def summary(output: str) -> list[str]:
    """The verdict's own lines: what it proved, the verdict, and each problem (not the table)."""
    proofs = ("state: ", "gradients: ", "traffic: ", "verdict: ", "  - ")
    return [line for line in verdict_lines(output) if line.startswith(proofs)]


def worker_lines(output: str, worker: int) -> list[str]:
    prefix = f"worker-{worker}-1"
    return [line.split("| ", 1)[-1] for line in output.splitlines() if line.startswith(prefix)]


def own_weights(output: str) -> dict[int, str]:
    """Each worker's hash of its own final weights, as freed_model.py printed it."""
    found = {}
    for worker in (0, 1):
        for line in worker_lines(output, worker):
            if line.startswith('{"event": "own_weights"'):
                record = json.loads(line)
                found[record["worker"]] = record["sha256"]
    return found


def test_a_model_freed_before_the_exit_fails_when_the_workers_weights_differ(warm_run):
    run = warm_run("--project", FOLDER, "--command", "python freed_model.py", "--env", "DRIFT=1")
    result = run.finish()
    hashes = own_weights(result.stdout)
    assert len(hashes) == 2 and hashes[0] != hashes[1], hashes  # The bug is real: each worker says so.
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert summary(result.stdout) == [
        "verdict: FAIL: 1 problem(s)",
        "  - model state differs at the end (step 12): worker-1 differs from worker-0 in 5 of 14 compared "
        "variables: sequential/dense/kernel, sequential/dense/bias, sequential/dense_1/kernel, "
        "sequential/dense_1/bias (and 1 more)",
    ]
    # Its report marks where the states first differed: the end, step 12, with the red cross.
    data, opened = report_of(run, result.stderr)
    assert data["verdict"]["synchronization"]["first_differing"] == {"point": "end", "index": 1, "step": 12, "run": 1}
    assert browser.pixels(opened.screenshot, DIFFERING) > 50


def test_a_model_freed_before_the_exit_passes_on_its_trained_variables_when_the_weights_agree(warm_run):
    run = warm_run("--project", FOLDER, "--command", "python freed_model.py")
    result = run.finish()
    hashes = own_weights(result.stdout)
    assert len(hashes) == 2 and hashes[0] == hashes[1], hashes
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    lines = summary(result.stdout)
    assert lines[0] == (
        "state: bitwise identical on 2 of 2 workers at 1 point, at the end (step 12): 14 of 14 trained variables; "
        "14 variables, 1.9 KB"
    )
    assert lines[1] == GRADIENTS
    assert lines[-1] == (
        f"verdict: PASS: 2 of 2 workers agree: {TUTORIAL_FIGURES}; weights identical at 1 point "
        "(14 of 14 trained variables; 14 variables, 1.9 KB)"
    )
    # The drifting run's negative control: its report marks nothing as differing.
    data, opened = report_of(run, result.stderr)
    assert data["verdict"]["synchronization"]["first_differing"] is None
    assert [[state["point"] for state in worker["states"]] for worker in data["workers"]] == [["end"], ["end"]]
    assert browser.pixels(opened.screenshot, DIFFERING) == 0


def test_steps_outside_strategy_run_fail_on_gradients_no_collective_reduced(warm_run):
    # Traced, the step's graph proves it at once: 5 s of training, not the eager case's half minute.
    result = run_program(warm_run, "no_allreduce.py", "--env", "SECONDS=5")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert summary(result.stdout) == [
        "verdict: FAIL: 2 problem(s)",
        *(
            f"  - worker-{index}: its Adam applied gradients that were never all-reduced: apply_gradients ran "
            "outside strategy.run, where it reduces nothing, and no collective produced them: each worker "
            "trained on its own gradients"
            for index in (0, 1)
        ),
    ]
    assert "model state differs" not in result.stdout  # Their weights agree: only the evidence says no.


def test_a_collective_in_the_step_that_reduces_no_gradient_is_no_reduction(warm_run):
    """The loss scaled by an all-reduced example count: a collective among the gradients' ancestors,
    but behind the backward pass, so it reduced a count, not the gradients."""
    result = run_program(warm_run, "no_allreduce.py", "--env", "GLOBAL_COUNT=1", "--env", "EPOCHS=25")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert summary(result.stdout)[1:] == [
        f"  - worker-{index}: its Adam applied gradients that were never all-reduced: apply_gradients ran "
        "outside strategy.run, where it reduces nothing, and no collective produced them: each worker "
        "trained on its own gradients"
        for index in (0, 1)
    ]
    assert "model state differs" not in result.stdout


def test_a_small_model_stepped_eagerly_outside_strategy_run_for_half_a_minute_fails_on_its_traffic(warm_run):
    result = run_program(warm_run, "no_allreduce.py", "--env", "EAGER=1")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    [heading, *unproven, problem] = summary(result.stdout)
    assert heading == "verdict: FAIL: 3 problem(s)"
    assert unproven == [
        f"  - worker-{index}: not proven: its Adam applied gradients eagerly outside strategy.run, where how they "
        "were reduced cannot be read (run the step in strategy.run, or as a tf.function)"
        for index in (0, 1)
    ]
    found = re.fullmatch(
        r"  - TensorFlow's connections carried less than (\d+) steps of all-reduce of 644 B of gradients "
        r"must move \(([\d.]+) KB each way\): worker-0 sent ([\d.]+) KB and received [\d.]+ KB; "
        r".*: the gradients did not cross the network, so the workers never synchronized",
        problem,
    )
    assert found, problem
    steps, need, sent = int(found.group(1)), float(found.group(2)), float(found.group(3))
    assert steps >= 400 and steps % 4 == 0, steps  # Half a minute of steps, every one counted.
    assert need == pytest.approx(steps * 322 / 1024, abs=0.1) and sent < need
    assert "model state differs" not in result.stdout


FAILURES = {
    "keras3_reset_states.py": "AttributeError: 'BinaryAccuracy' object has no attribute 'reset_states'.",
    "readonly_save.py": "OSError: [Errno 30] Read-only file system: 'model.keras'",
    "own_assertion.py": "tensorflow.python.framework.errors_impl.InvalidArgumentError: Condition x > y did not hold.",
}


@pytest.mark.parametrize("program", list(FAILURES))
def test_every_worker_failing_the_same_way_is_one_problem_naming_the_error_first(warm_run, program):
    result = run_program(warm_run, program)
    # Every worker raised the program's own error itself.
    for worker in (0, 1):
        raised = any(line.startswith(FAILURES[program]) for line in worker_lines(result.stdout, worker))
        assert raised, f"worker-{worker}: " + result.stdout[-3000:]
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    heading, first, *_ = summary(result.stdout)
    assert heading == "verdict: FAIL: 1 problem(s)", summary(result.stdout)
    assert first.startswith(f"  - every worker (worker-0, worker-1) raised the same error: {FAILURES[program]}")
    assert "losing peer" not in first


@pytest.mark.parametrize(
    ("program", "variable", "trained"),
    [("readonly_save.py", "SAVE_DIR=/tmp", 6), ("keras3_reset_states.py", "TF_USE_LEGACY_KERAS=1", 13)],
)
def test_the_failing_programs_pass_with_their_bug_switched_off(warm_run, program, variable, trained):
    result = run_program(warm_run, program, "--env", variable)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    verdict = summary(result.stdout)[-1]
    assert verdict.startswith("verdict: PASS: 2 of 2 workers agree: replicas=2"), verdict
    assert f"({trained} of {trained} trained variables; " in verdict, verdict


def test_checkpoints_of_backup_and_restore_and_model_checkpoint_on_every_worker_pass(warm_run):
    result = run_program(warm_run, "checkpoint_and_backup.py", *LEGACY_KERAS)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    state = summary(result.stdout)[0]
    assert state.startswith("state: bitwise identical on 2 of 2 workers at "), state
    assert ": 9 of 9 trained variables at the end (step 15); " in state, state


def test_a_model_checkpoint_on_the_chief_alone_is_matched_by_step_and_passes(warm_run):
    result = run_program(warm_run, "checkpoint_and_backup.py", *LEGACY_KERAS, "--env", "CHIEF_ONLY=1")
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    assert summary(result.stdout)[-1].startswith("verdict: PASS: 2 of 2 workers agree: ")

"""Each worker's data its own: real programs, not written for this harness, each beside its negative control.

Each program of tests/fixtures/data/ runs unchanged on the cluster through scripts/run
(tests/fixtures/data/README.md). The gradients are all-reduced whatever the workers read, so the
weights agree in every one of them: only the keys of what each worker's input delivered
(trainer/observer/data.py, trainer/verifier/data.py) tell a sharded input from one every worker
reads whole.

They run on their module's warm cluster (tests/container/conftest.py's warm_run), in an order that
changes TF_USE_LEGACY_KERAS once: each change restarts the warm zygotes under the new key.
"""

import functools
import json
import re

from tests.container import conftest
from tests.container.conftest import LEGACY_KERAS, verdict_lines
from trainer.contract.exitcodes import ExitCode

run_program = functools.partial(conftest.run_program, folder="tests/fixtures/data")


def data_lines(output: str) -> list[str]:
    """The data proof, the verdict, and each problem."""
    return [line for line in verdict_lines(output) if line.startswith(("data: ", "verdict: ", "  - "))]


def test_the_tutorials_sharded_input_passes_with_its_data_line(warm_run):
    result = run_program(warm_run, "sharding.py")
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    [data, verdict] = data_lines(result.stdout)
    assert data == "data: each worker read its own examples: 128 distinct each, none shared, 256 in all"
    assert verdict.startswith("verdict: PASS: 2 of 2 workers agree")


def test_an_unsharded_input_fails_naming_the_same_examples_and_batches(warm_run):
    result = run_program(warm_run, "sharding.py", "--env", "SHARD=0")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert data_lines(result.stdout) == [
        "verdict: FAIL: 1 problem(s)",
        "  - worker-0 and worker-1 read the same 192 examples (100%), in identical batches at 12 of 12 steps: "
        "the input is not sharded (dataset_fn without .shard, or AutoShardPolicy.OFF)",
    ]


def test_an_unsharded_input_meant_to_be_replicated_passes_saying_what_was_shared(warm_run):
    result = run_program(warm_run, "sharding.py", "--env", "SHARD=0", environment={"TF_DATA_SHARDING": "replicated"})
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    assert data_lines(result.stdout)[0] == (
        "data: replicated, as TF_DATA_SHARDING=replicated allows: worker-0 and worker-1 read the same 192 examples "
        "(100%), in identical batches at 12 of 12 steps"
    )


def test_an_unsharded_input_shuffled_per_worker_fails_with_its_overlap(warm_run):
    result = run_program(warm_run, "sharding.py", "--env", "SHARD=0", "--env", "SEED=worker")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    [verdict, problem] = data_lines(result.stdout)
    assert verdict == "verdict: FAIL: 1 problem(s)"
    found = re.fullmatch(
        r"  - worker-0 and worker-1 both read (\d+) of their examples \((\d+)%\): the input is sharded differently "
        r"on each worker, or not at all \(a shuffle before the shard not seeded alike on every worker, or no \.shard\)",
        problem,
    )
    # Each reads 192 of the same 256 in its own order: about 192 * 192 / 256 = 144 in common.
    assert found and 100 < int(found[1]) < 192, problem


def test_an_input_fed_by_hand_is_not_observed_and_claims_nothing(warm_run):
    result = run_program(warm_run, "generator_fed.py")
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    [data, verdict] = data_lines(result.stdout)
    assert data == (
        "data: not observed: no training step took its examples from a dataset the strategy distributed "
        "(a generator or tensors fed to the step by hand): nothing is claimed about what each worker read"
    )
    assert verdict.startswith("verdict: PASS")


def test_keras_fit_under_the_default_policy_passes_and_with_sharding_off_fails(warm_run):
    # With a validation pass after each epoch: told apart, and not one of its examples in training's figures.
    result = run_program(warm_run, "keras_fit.py", *LEGACY_KERAS, "--env", "VALIDATION=1")
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    assert data_lines(result.stdout)[0] == (
        "data: each worker read its own examples: 128 distinct each, none shared, 256 in all; apart from training, "
        "not judged: an evaluation read 32 distinct each, none shared"
    )
    [record] = [json.loads(line) for line in verdict_lines(result.stdout) if line.startswith('{"event": "verdict"')]
    for worker in ("worker-0", "worker-1"):
        figures = record["data"]["workers"][worker]
        # Each of fit's epochs, its validation apart: the whole shard, then the same again.
        assert figures["epochs"] == [{"examples": 128, "new": 128}, {"examples": 128, "new": 0}], figures
        assert figures["evaluation"] == {"examples": 64, "distinct": 32, "exact": True}, figures
    result = run_program(warm_run, "keras_fit.py", *LEGACY_KERAS, "--env", "POLICY=OFF")
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert data_lines(result.stdout)[1:] == [
        # Two epochs of 8 steps, both workers reading the whole of the same 128: named over one epoch.
        "  - worker-0 and worker-1 read the same 128 examples (100%) in one pass over the data (the first 8 of 16 "
        "steps), in identical batches at 16 of 16 steps: "
        "the input is not sharded (dataset_fn without .shard, or AutoShardPolicy.OFF)",
    ]


def test_keras_fit_on_tfrecord_files_sharded_by_file_passes(warm_run):
    records = ["--data", "tests/fixtures/data/records", "--env", "RECORDS=1"]
    result = run_program(warm_run, "keras_fit.py", *LEGACY_KERAS, *records, "--env", "POLICY=FILE")
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    assert data_lines(result.stdout)[0] == (
        "data: each worker read its own examples: 128 distinct each, none shared, 256 in all"
    )

"""Each worker's data its own (trainer/verifier/data.py), judged from hand-made records of what the
observer keys (the real programs: tests/container/test_data.py)."""

import random
import re
from xml.etree import ElementTree

import pytest
from tfcluster.cluster.result import Run

from tests.observations import TRAINED, connections, data, lines, state, strategy, update
from trainer.contract import verdict as contract_verdict
from trainer.verifier import render
from trainer.verifier.verdict import WorkerReport, judge

SPACE = 1 << 64


def log(index: int, *records: dict) -> str:
    end = state(index, step=12, trained=TRAINED)
    end["steps_run"] = 12
    return lines(strategy(index), update(index), end, *records, connections(40_000))


def verdict_of(*logs: str):
    reports = [WorkerReport(name=f"worker-{i}", state="exited", exit_code=0, log=text) for i, text in enumerate(logs)]
    return judge(reports, expected_workers=len(logs))


def data_line(verdict) -> str:
    [line] = [line for line in render.table(verdict).splitlines() if line.startswith("data: ")]
    return line


def test_disjoint_examples_pass_with_the_figures():
    verdict = verdict_of(log(0, data(0, range(1, 129))), log(1, data(1, range(1001, 1129))))
    assert verdict.passed, verdict.problems
    assert data_line(verdict) == "data: each worker read its own examples: 128 distinct each, none shared, 256 in all"


def test_the_same_examples_fail_naming_the_workers_the_share_and_the_cause():
    batches = ["aa", "bb", "cc"]
    verdict = verdict_of(
        log(0, data(0, range(1, 257), batches=batches)), log(1, data(1, range(1, 257), batches=batches))
    )
    assert verdict.problems == (
        "worker-0 and worker-1 read the same 256 examples (100%), in identical batches at 3 of 3 steps: "
        "the input is not sharded (dataset_fn without .shard, or AutoShardPolicy.OFF)",
    )


def test_examples_the_program_means_to_replicate_pass_saying_what_was_shared():
    reports = [
        WorkerReport(name=f"worker-{i}", state="exited", exit_code=0, log=log(i, data(i, range(1, 65)))) for i in (0, 1)
    ]
    verdict = judge(reports, expected_workers=2, data_replicated=True)
    assert verdict.passed, verdict.problems
    assert data_line(verdict) == (
        "data: replicated, as TF_DATA_SHARDING=replicated allows: "
        "worker-0 and worker-1 read the same 64 examples (100%)"
    )


def test_a_partial_overlap_fails_with_its_share_and_a_tiny_one_is_told_not_failed():
    verdict = verdict_of(log(0, data(0, range(100))), log(1, data(1, range(60, 160))))
    assert verdict.problems == (
        "worker-0 and worker-1 both read 40 of their examples (40%): the input is sharded differently on each "
        "worker, or not at all (a shuffle seeded per worker before .shard, or no .shard)",
    )
    verdict = verdict_of(log(0, data(0, range(1000))), log(1, data(1, range(999, 1999))))
    assert verdict.passed, verdict.problems
    assert data_line(verdict) == (
        "data: each worker read its own examples: 1000 distinct each, 1 shared (under 1%: the same example twice?), "
        "1999 in all"
    )


def test_a_worker_that_read_nothing_fails_and_no_observed_input_claims_nothing():
    verdict = verdict_of(log(0, data(0, range(10))), log(1, data(1, [], examples=0)))
    assert verdict.problems == (
        "worker-1 read no examples for training from the strategy's distributed dataset, while worker-0 did",
    )
    verdict = verdict_of(log(0, data(0, [], examples=0)), log(1, data(1, [], examples=0)))
    assert verdict.passed, verdict.problems
    assert data_line(verdict).startswith("data: not observed: no training step took its examples from a dataset")
    # Records older than the keys (a saved log) are not judged: no line at all.
    assert not [line for line in render.table(verdict_of(log(0), log(1))).splitlines() if line.startswith("data")]
    # What was delivered where no gradient was applied (an evaluation) is not training's.
    evaluated = [[data(index, [], examples=0), data(index, range(5), use="other")] for index in (0, 1)]
    verdict = verdict_of(log(0, *evaluated[0]), log(1, *evaluated[1]))
    assert data_line(verdict).startswith("data: not observed")


def test_sketches_of_large_data_sets_estimate_the_overlap_and_say_so():
    generator = random.Random(7)
    keys = list({generator.getrandbits(64) for _ in range(150_000)})  # As random as the observer's keys.
    first, second, apart = keys[:100_000], keys[50_000:], keys[100_000:]  # Half of second is first's.

    def sketched(index: int, found: list[int]) -> dict:
        return data(index, sorted(found)[:2048], distinct=None, examples=len(found))  # As the observer keeps them.

    same = verdict_of(log(0, sketched(0, first)), log(1, sketched(1, first)))
    assert re.fullmatch(
        r"worker-0 and worker-1 read the same examples, about 10\d000 of them \(100%\): .*", same.problems[0]
    )
    half = verdict_of(log(0, sketched(0, first)), log(1, sketched(1, second)))
    found = re.fullmatch(
        r"worker-0 and worker-1 both read about (\d+) of their examples \((\d+)%\): .*", half.problems[0]
    )
    assert found and 40_000 < int(found[1]) < 60_000 and 40 <= int(found[2]) <= 60, half.problems
    verdict = verdict_of(log(0, sketched(0, first)), log(1, sketched(1, apart)))
    assert verdict.passed, verdict.problems
    line = data_line(verdict)
    assert re.fullmatch(
        r"data: each worker read its own examples: \d+ to \d+ distinct each, none shared, \d+ in all "
        r"\(estimated from a sample of their keys\)",
        line,
    ), line


def test_the_verdicts_record_junit_and_run_carry_the_data_proof():
    same = verdict_of(log(0, data(0, range(1, 257))), log(1, data(1, range(1, 257))))
    record = render.record(same)
    assert record["data"]["problems"] == list(same.problems)
    assert record["data"]["workers"]["worker-1"] == {"examples": 256, "distinct": 256, "exact": True}
    assert record["synchronization"]["differences"] == []  # The states were identical: only the data failed.
    suite = ElementTree.fromstring(render.junit(same))
    failed = {case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None}
    assert failed == {"each worker's data its own"}
    with pytest.raises(AssertionError, match="each worker's data was not proven its own:\nworker-0 and worker-1 read"):
        Run(7, True, record).assert_data_sharded()

    disjoint = render.record(verdict_of(log(0, data(0, range(10))), log(1, data(1, range(10, 20)))))
    run = Run(0, True, disjoint)
    run.assert_data_sharded()
    run.assert_synchronized()
    assert run.data["proven"] == "data: each worker read its own examples: 10 distinct each, none shared, 20 in all"

    unseen = render.record(verdict_of(log(0, data(0, [], examples=0)), log(1, data(1, [], examples=0))))
    suite = ElementTree.fromstring(contract_verdict.junit(unseen))
    [own] = [case for case in suite.iter("testcase") if case.get("name") == "each worker's data its own"]
    assert own.find("skipped").get("message").startswith("data: not observed")
    with pytest.raises(AssertionError, match="data: not observed"):
        Run(0, True, unseen).assert_data_sharded()

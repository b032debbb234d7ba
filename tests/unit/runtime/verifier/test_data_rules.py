"""Each worker's data its own (trainer/verifier/data.py), judged from hand-made records of what the
observer keys (the real programs: tests/container/test_data.py)."""

import random
import re
from xml.etree import ElementTree

import pytest
from tfcluster.cluster.result import Run

from tests.observations import TRAINED, connections, data, delivered, lines, state, strategy, update
from trainer.contract import verdict as contract_verdict
from trainer.verifier import render
from trainer.verifier.verdict import WorkerReport, judge

SPACE = 1 << 64


def log(index: int, *records: dict, workers: int = 2) -> str:
    end = state(index, step=12, trained=TRAINED)
    end["steps_run"] = 12
    return lines(strategy(index, workers=workers), update(index), end, *records, connections(40_000))


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
    # Allowed, so the run passes; but its data were not each worker's own, and the record says so.
    run = Run(0, True, render.record(verdict))
    run.assert_synchronized()
    assert run.data["replicated"] is True
    with pytest.raises(AssertionError, match="not proven its own:\ndata: replicated, as TF_DATA_SHARDING"):
        run.assert_data_sharded()


def test_a_partial_overlap_fails_with_its_share_and_a_tiny_one_is_told_not_failed():
    verdict = verdict_of(log(0, data(0, range(100))), log(1, data(1, range(60, 160))))
    assert verdict.problems == (
        "worker-0 and worker-1 both read 40 of their examples (40%): the input is sharded differently on each "
        "worker, or not at all (a shuffle before the shard not seeded alike on every worker, or no .shard)",
    )
    verdict = verdict_of(log(0, data(0, range(1000))), log(1, data(1, range(999, 1999))))
    assert verdict.passed, verdict.problems
    assert data_line(verdict) == (
        "data: each worker read its own examples: 1000 distinct each, 1 shared (under 1%: the same example twice?), "
        "1999 in all"
    )


def test_an_evaluation_is_told_apart_from_training_and_not_judged():
    # Keras's validation pass under the strategy: each worker its shard of the validation data, apart.
    verdict = verdict_of(
        log(0, data(0, range(1, 129)), data(0, range(500, 532), use="other")),
        log(1, data(1, range(1001, 1129)), data(1, range(532, 564), use="other")),
    )
    assert data_line(verdict) == (
        "data: each worker read its own examples: 128 distinct each, none shared, 256 in all; apart from training, "
        "not judged: an evaluation read 32 distinct each, none shared"
    )
    assert render.record(verdict)["data"]["workers"]["worker-1"] == {
        "examples": 128, "distinct": 128, "exact": True, "evaluation": {"examples": 32, "distinct": 32, "exact": True},
    }  # fmt: skip
    # Every worker evaluating the same data (or the chief alone) fails nothing: it is only told.
    verdict = verdict_of(
        log(0, data(0, range(1, 129)), data(0, range(500, 532), use="other")), log(1, data(1, range(1001, 1129)))
    )
    assert verdict.passed, verdict.problems
    assert data_line(verdict).endswith("an evaluation read 32 distinct each on worker-0 alone, none shared")
    verdict = verdict_of(
        *(log(i, data(i, range(i * 1000, i * 1000 + 64)), data(i, range(64), use="other")) for i in (0, 1))
    )
    assert verdict.passed, verdict.problems
    assert data_line(verdict).endswith("an evaluation read 64 distinct each, 64 shared")


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


def global_stream(data_set: list[int], *, workers: int, batch: int, steps: int) -> list[list[list[int]]]:
    """Each worker's batches when one stream of the repeated data set is split into global batches, each
    worker taking its place in every one (AutoShardPolicy.DATA after `.repeat().batch()`)."""
    stream = [data_set[place % len(data_set)] for place in range(workers * batch * steps)]
    return [
        [stream[(step * workers + worker) * batch : (step * workers + worker + 1) * batch] for step in range(steps)]
        for worker in range(workers)
    ]


def test_a_repeated_data_set_sharded_by_place_passes_within_one_pass_over_it():
    # 512 examples, 3 workers of 32: a global batch of 96 does not divide the data set, so each step's
    # places move over it and by the end every worker has read every example, one pass after another.
    each = global_stream(list(range(1, 513)), workers=3, batch=32, steps=48)
    verdict = verdict_of(*(log(worker, delivered(worker, each[worker]), workers=3) for worker in range(3)))
    assert verdict.passed, verdict.problems
    assert data_line(verdict) == (
        "data: each worker read its own examples: 160 distinct each, none shared, 480 in all in one pass over the "
        "data (the first 5 of 48 steps); 512 over the run, read again since"
    )
    assert render.record(verdict)["data"]["workers"]["worker-2"] == {
        "examples": 1536, "distinct": 512, "exact": True, "one_pass": {"steps": 5, "examples": 160},
    }  # fmt: skip
    # The same, every worker reading the stream whole (no shard): the same examples within the cluster's
    # pass too, which fails; named over each worker's own pass (its epoch), not the cluster's.
    alike = [batches for batches in global_stream(list(range(1, 513)), workers=1, batch=32, steps=48)] * 3
    verdict = verdict_of(*(log(worker, delivered(worker, alike[worker]), workers=3) for worker in range(3)))
    assert verdict.problems[0] == (
        "worker-0 and worker-1 read the same 512 examples (100%) in one pass over the data (the first 16 of 48 steps), "
        "in identical batches at 48 of 48 steps: the input is not sharded (dataset_fn without .shard, or "
        "AutoShardPolicy.OFF)"
    )
    assert len(verdict.problems) == 3  # Every pair.


def test_each_keras_epoch_is_counted_in_the_record():
    # Two epochs of 4 steps of 8 over each worker's 32: the second reads nothing new.
    each = global_stream(list(range(1, 65)), workers=2, batch=8, steps=8)
    records = [delivered(worker, each[worker]) | {"epochs": [4, 8]} for worker in (0, 1)]
    verdict = verdict_of(log(0, records[0]), log(1, records[1]))
    assert verdict.passed, verdict.problems
    assert render.record(verdict)["data"]["workers"]["worker-1"]["epochs"] == [
        {"examples": 32, "new": 32},
        {"examples": 32, "new": 0},
    ]


def test_an_unsharded_run_shorter_than_a_pass_is_named_with_all_it_read():
    # Each reads the same 192 of 256 in the same order and none twice: no data came back, so there is
    # no pass to narrow to (the cluster read 384 of 192 distinct only because the workers shared them).
    alike = global_stream(list(range(1, 257)), workers=1, batch=16, steps=12) * 2
    verdict = verdict_of(*(log(worker, delivered(worker, alike[worker])) for worker in (0, 1)))
    assert verdict.problems == (
        "worker-0 and worker-1 read the same 192 examples (100%), in identical batches at 12 of 12 steps: "
        "the input is not sharded (dataset_fn without .shard, or AutoShardPolicy.OFF)",
    )


def test_a_large_repeated_data_set_is_judged_within_one_pass_from_its_sketches():
    generator = random.Random(11)
    data_set = list({generator.getrandbits(64) for _ in range(20_000)})  # Past what is kept exactly.
    each = global_stream(data_set, workers=2, batch=64, steps=480)  # Three passes and more.
    verdict = verdict_of(*(log(worker, delivered(worker, each[worker], sketch=2048)) for worker in (0, 1)))
    assert verdict.passed, verdict.problems
    line = data_line(verdict)
    assert re.fullmatch(
        r"data: each worker read its own examples: \d+ to \d+ distinct each, none shared, \d+ in all in one pass "
        r"over the data \(the first 1\d\d of 480 steps\); \d+ over the run, read again since \(estimated .*\)",
        line,
    ), line
    alike = global_stream(data_set, workers=1, batch=64, steps=480) * 2
    verdict = verdict_of(*(log(worker, delivered(worker, alike[worker], sketch=2048)) for worker in (0, 1)))
    assert re.fullmatch(
        r"worker-0 and worker-1 read the same examples, about \d+ of them \(100%\) in one .*", verdict.problems[0]
    )


def test_epochs_reshuffled_alike_pass_and_shuffled_per_worker_fail_within_one_pass():
    data_set = list(range(1, 257))

    def epochs(seeds: list[int]) -> list[int]:
        stream = []
        for seed in seeds:
            order = list(data_set)
            random.Random(seed).shuffle(order)
            stream += order
        return stream

    # Four epochs, each reshuffled with the same seeds on both workers, then split by place: over the
    # run both read every example, each epoch's share its own.
    stream = epochs([1, 2, 3, 4])
    alike = [
        [stream[(2 * step + worker) * 16 : (2 * step + worker + 1) * 16] for step in range(32)] for worker in (0, 1)
    ]
    verdict = verdict_of(log(0, delivered(0, alike[0])), log(1, delivered(1, alike[1])))
    assert verdict.passed, verdict.problems
    assert data_line(verdict).startswith("data: each worker read its own examples: 128 distinct each, none shared, ")
    # Each worker its own seeds (an unseeded shuffle): about half of one pass is the other's.
    apart = [epochs([1 + worker, 5 + worker]) for worker in (0, 1)]
    per_worker = [
        [apart[worker][(2 * step + worker) * 16 : (2 * step + worker + 1) * 16] for step in range(16)]
        for worker in (0, 1)
    ]
    verdict = verdict_of(log(0, delivered(0, per_worker[0])), log(1, delivered(1, per_worker[1])))
    found = re.fullmatch(
        r"worker-0 and worker-1 both read (\d+) of their examples \((\d+)%\) in one pass over the data "
        r"\(the first \d+ of 16 steps\): the input is sharded differently on each worker, .*",
        verdict.problems[0],
    )
    assert found and 30 <= int(found[2]) <= 70, verdict.problems


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

"""Faults timed by training progress: their clauses (trainer/contract/faults.py) and the shaper's
schedule (trainer/shaper/schedule.py), against a progress file written as the observer writes it."""

import json
import re
import threading
import time

import pytest

from trainer.contract import faults
from trainer.shaper import schedule
from trainer.verifier import faults as faults_of_verdict


def test_clauses_read_as_faults_and_describe_themselves():
    found = faults.parse(
        "cut worker-2 at epoch 2 for 20s; cut worker-1 out at 3.5s for 5s ;cut worker-0 in at step 8 for 1s"
    )
    assert [fault.describe() for fault in found] == [
        "cut worker-2 off at epoch 2 for 20s",
        "cut worker-1 off one way (what leaves it) at 3.5s after its first step for 5s",
        "cut worker-0 off one way (what arrives at it) at step 8 for 1s",
    ]
    assert found[2] == faults.Fault(worker="worker-0", way="in", trigger="step", at=8, seconds=1)
    assert faults.parse("") == [] and faults.parse(" ; ") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "cut worker-2 at noon for 5s",
            "'cut worker-2 at noon for 5s' is not a fault (cut WORKER [in | out] at step N",
        ),
        ("cut worker-2 at step 3", "'cut worker-2 at step 3' is not a fault"),
        ("partition worker-2 at step 3 for 1s", "is not a fault"),
        ("cut worker-2 at step 0 for 1s", "steps and epochs count from 1, a cut lasts more than 0s"),
        ("cut worker-2 at step 3 for 0s", "steps and epochs count from 1, a cut lasts more than 0s"),
        ("cut worker-7 at step 3 for 1s", "no worker-7 in this cluster (worker-0, worker-1)"),
    ],
)
def test_a_bad_clause_is_named_in_one_line(text, message):
    with pytest.raises(ValueError) as raised:
        faults.parse(text, workers=["worker-0", "worker-1"])
    said = str(raised.value)
    assert said.startswith("`TF_NETWORK_FAULTS`: ") and message in said and "\n" not in said, said


def write(path, **progress):
    path.write_text(json.dumps({"steps": 0, "epochs": 0, "first_step": None} | progress))


@pytest.mark.parametrize(
    ("clause", "before", "after"),
    [
        ("cut worker-1 at step 5 for 0.1s", {"steps": 4}, {"steps": 5}),
        ("cut worker-1 at epoch 2 for 0.1s", {"steps": 9, "epochs": 0}, {"steps": 10, "epochs": 1}),
        ("cut worker-1 at epoch 1 for 0.1s", {"steps": 0}, {"steps": 1}),
        ("cut worker-1 at 0.3s for 0.1s", {"steps": 0}, {"steps": 1, "first_step": time.time()}),
    ],
)
def test_a_fault_is_cut_when_the_training_reaches_it_then_healed_and_recorded(tmp_path, clause, before, after):
    progress, record = tmp_path / "worker-1.progress", tmp_path / "faults-worker-1.json"
    write(progress, **before)
    calls = []
    ended = threading.Event()
    [fault] = faults.parse(clause)
    running = threading.Thread(
        target=schedule.run,
        args=([fault],),
        kwargs={
            "progress": progress,
            "record": record,
            "cut": lambda way: calls.append(("cut", way, json.loads(progress.read_text())["steps"])),
            "heal": lambda: calls.append(("heal",)),
            "ended": ended,
            "say": lambda line: None,
        },
    )
    running.start()
    time.sleep(3 * schedule.POLL)
    assert calls == []  # Not yet: the training is short of it.
    write(progress, **after)
    deadline = time.monotonic() + 5
    while ("heal",) not in calls and time.monotonic() < deadline:
        time.sleep(schedule.POLL)
    assert calls == [("cut", "both", after["steps"]), ("heal",)]
    running.join(timeout=5)
    assert not running.is_alive()
    [entry] = json.loads(record.read_text())
    assert entry["reached"] is True and entry["step"] == after["steps"] and entry["fault"] == fault.describe()
    assert 0.1 <= entry["healed_at"] - entry["cut_at"] < 1
    # The verdict takes the worker's end from its final status, written as its launcher finished.
    (tmp_path / "worker-1.status").write_text("{}")
    [judged] = faults_of_verdict.records(tmp_path, ["worker-0", "worker-1"])
    assert judged["worker_ended_at"] >= entry["healed_at"]
    assert re.fullmatch(
        rf"fault: {re.escape(fault.describe())}: cut at step {after['steps']}, healed 0\.\ds later; "
        r"worker-1 ended \d+\.\ds after the cut",
        faults_of_verdict.line(judged),
    )
    assert faults_of_verdict.problems((judged,)) == ()
    # A worker that ended during the cut (its peers lost it) is said to have, still cut off.
    during = judged | {"healed_at": None, "worker_ended_at": entry["cut_at"] + 8.04}
    assert faults_of_verdict.line(during) == (
        f"fault: {fault.describe()}: cut at step {after['steps']}; worker-1 ended 8.0s after the cut, still cut off"
    )


def test_a_fault_the_training_never_reaches_is_recorded_as_not_cut(tmp_path):
    progress, record = tmp_path / "worker-1.progress", tmp_path / "faults-worker-1.json"
    ended = threading.Event()
    ended.set()  # The worker ended: nothing more will come.
    said = []
    done = schedule.run(
        faults.parse("cut worker-1 at step 5 for 1s"),
        progress=progress,
        record=record,
        cut=lambda way: pytest.fail("cut"),
        heal=lambda: pytest.fail("healed"),
        ended=ended,
        say=said.append,
    )
    assert [entry["reached"] for entry in done] == [False] == [e["reached"] for e in json.loads(record.read_text())]
    assert said == ["worker-1: its training ended before step 5: not cut"]
    # The verdict says so, and fails: the run did not test what it was asked to.
    assert faults_of_verdict.records(tmp_path, ["worker-0", "worker-1"]) == tuple(
        entry | {"worker_ended_at": None} for entry in done
    )
    assert (
        faults_of_verdict.line(done[0])
        == "fault: cut worker-1 off at step 5 for 1s: not reached, the training ended first"
    )
    assert faults_of_verdict.problems(tuple(done)) == (
        "fault never injected: cut worker-1 off at step 5 for 1s (the training ended before it): "
        "the run did not test it",
    )

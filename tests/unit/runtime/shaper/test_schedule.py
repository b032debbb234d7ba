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
        ("cut worker-2 at step 0 for 1s", "steps and epochs count from 1, a fault lasts more than 0s"),
        ("cut worker-2 at step 3 for 0s", "steps and epochs count from 1, a fault lasts more than 0s"),
        ("cut worker-7 at step 3 for 1s", "no worker-7 in this cluster (worker-0, worker-1)"),
        (
            "cut worker-1 at step 3 for 1s; cut worker-1 at step 3 for 1s",
            "'cut worker-1 at step 3 for 1s': given twice",
        ),
        ("worker-0 <-> worker-7: thin at step 3 for 1s", "no worker-7 in this cluster (worker-0, worker-1)"),
        ("worker-0 <-> worker-1: fast at step 3 for 1s", "'fast' is not a profile (lan, wan, lossy, thin)"),
        ("worker-0 <-> worker-0: thin at step 3 for 1s", "a worker on both sides (worker-0)"),
        ("worker-0 <-> worker-1: thin at step 3", "is not a fault"),
        ("worker-0 <-> worker-1: thin for 3s", "is not a fault"),
        ("* <-> *: thin at step 3 for 1s", "one side must name its workers"),
        ("foo: thin at step 3 for 1s", "'foo: thin at step 3 for 1s': 'foo: thin' is not a link (GROUP <-> GROUP"),
    ],
)
def test_a_bad_clause_is_named_in_one_line(text, message):
    with pytest.raises(ValueError) as raised:
        faults.parse(text, workers=["worker-0", "worker-1"])
    said = str(raised.value)
    assert said.startswith("`TF_NETWORK_FAULTS`: ") and message in said and "\n" not in said, said
    assert "TF_NETWORK_LINKS" not in said, said  # A link's reason, said of the fault's clause.


def write(path, **progress):
    path.write_text(json.dumps({"steps": 0, "epochs": 0, "first_step": None} | progress))


@pytest.mark.parametrize(
    ("clause", "before", "after"),
    [
        ("cut worker-1 at step 5 for 0.1s", {"steps": 4}, {"steps": 5}),
        # Epoch 1 has ended, and its end's work (a checkpoint) is under way: not yet, until a step of epoch 2.
        (
            "cut worker-1 at epoch 2 for 0.1s",
            {"steps": 10, "epochs": 1, "epoch_step": 10},
            {"steps": 11, "epochs": 1, "epoch_step": 10},
        ),
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
            "inject": lambda fault: calls.append(("cut", fault.way, json.loads(progress.read_text())["steps"])),
            "undo": lambda fault: calls.append(("heal",)),
            "worker": "worker-1",
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
        r"steps none in 0\.\ds during, none in 0\.\ds after; worker-1 ended \d+\.\ds after the cut",
        faults_of_verdict.line(judged),
    )
    assert faults_of_verdict.problems((judged,)) == ()
    # A worker that ended during the cut (its peers lost it) is said to have, still cut off.
    during = judged | {"healed_at": None, "worker_ended_at": entry["cut_at"] + 8.04, "step_time": None}
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
        inject=lambda fault: pytest.fail("cut"),
        undo=lambda fault: pytest.fail("healed"),
        worker="worker-1",
        ended=ended,
        say=said.append,
    )
    assert [entry["reached"] for entry in done] == [False] == [e["reached"] for e in json.loads(record.read_text())]
    assert said == ["worker-1: its training ended before step 5: not cut"]
    # The verdict says so, and fails: the run did not test what it was asked to.
    assert faults_of_verdict.records(tmp_path, ["worker-0", "worker-1"]) == tuple(
        entry | {"by": "worker-1", "worker_ended_at": None} for entry in done
    )
    assert (
        faults_of_verdict.line(done[0])
        == "fault: cut worker-1 off at step 5 for 1s: not reached, the training ended first"
    )
    assert faults_of_verdict.problems(tuple(done)) == (
        "fault never injected: cut worker-1 off at step 5 for 1s (the training ended before it): "
        "the run did not test it",
    )


def test_a_shaper_started_again_after_a_restart_keeps_the_faults_already_injected(tmp_path):
    progress, record = tmp_path / "worker-1.progress", tmp_path / "faults-worker-1.json"
    first, second = faults.parse("cut worker-1 at epoch 2 for 60s; cut worker-1 at step 3 for 0.1s")
    # The first run's shaper cut at epoch 2 and was stopped with its worker before it healed.
    earlier = {"fault": first.describe(), "worker": "worker-1", "reached": True, "cut_at": 1.0, "step": 12}
    record.write_text(json.dumps([earlier]))
    write(progress, steps=12, epochs=1)  # The resumed run is past epoch 2 again: no second cut.
    calls, said, ended = [], [], threading.Event()
    done = schedule.run(
        [first, second],
        progress=progress,
        record=record,
        inject=lambda fault: calls.append(("cut", fault.way)),
        undo=lambda fault: calls.append(("heal",)) or ended.set(),
        worker="worker-1",
        ended=ended,
        say=said.append,
    )
    assert calls == [("cut", "both"), ("heal",)]  # The second fault alone.
    assert [entry["fault"] for entry in done] == [first.describe(), second.describe()]
    assert done[0] == earlier and json.loads(record.read_text()) == done
    assert said[0] == "worker-1: 1 fault(s) injected before the restart: not again"
    # A record that is not this schedule's (another clause first) is not taken for it.
    record.write_text(json.dumps([earlier | {"fault": second.describe()}]))
    assert schedule._reached_before([first, second], record) == []


def test_a_fault_the_cluster_failed_after_names_the_restart_that_followed(tmp_path):
    cut = {"fault": "cut worker-1 off at epoch 2 for 60s", "worker": "worker-1", "reached": True, "cut_at": 100.0}
    (tmp_path / "faults-worker-1.json").write_text(json.dumps([cut | {"step": 12}]))
    (tmp_path / "worker-1.status").write_text("{}")  # The resumed run's end, long after.
    # The keeper's record: a failure before the cut (not this fault's), then the one after it.
    restarts = [
        {"reason": "worker-0 exited 1", "failed_at": 90.0},
        {"reason": "worker-0 exited 5", "failed_at": 110.25},
    ]
    [entry] = faults_of_verdict.records(tmp_path, ["worker-0", "worker-1"], restarts)
    assert entry["restart"] == 2 and entry["cluster_failed_at"] == 110.25
    assert faults_of_verdict.line(entry) == (
        "fault: cut worker-1 off at epoch 2 for 60s: cut at step 12; the cluster failed 10.2s after the cut, "
        "still cut off, and restart 2 began it again from its newest checkpoint"
    )
    healed = entry | {"healed_at": 105.0}
    assert ", healed 5.0s later; the cluster failed 10.2s after the cut, and restart 2" in faults_of_verdict.line(
        healed
    )
    # No restart after the cut: the worker's own end, as without a keeper.
    [alone] = faults_of_verdict.records(tmp_path, ["worker-1"], restarts[:1])
    assert "restart" not in alone and "worker-1 ended" in faults_of_verdict.line(alone)


def test_a_worker_that_ends_during_its_cut_is_said_to_have_ended_cut_off_not_healed(tmp_path):
    progress, record = tmp_path / "worker-1.progress", tmp_path / "faults-worker-1.json"
    write(progress, steps=6)
    ended, said = threading.Event(), []
    # Lost to its peers 0.2 s into a 60 s cut: its shaper takes the rules away as it ends.
    threading.Timer(0.2, ended.set).start()
    [entry] = schedule.run(
        faults.parse("cut worker-1 at step 6 for 60s"),
        progress=progress,
        record=record,
        inject=lambda fault: None,
        undo=lambda fault: None,
        worker="worker-1",
        ended=ended,
        say=said.append,
    )
    assert entry["until_worker_end"] is True and entry["healed_at"] - entry["cut_at"] < 5
    assert re.fullmatch(r"worker-1: its worker ended, cut off, after 0\.\ds", said[-1])
    # Its end came a moment after its shaper's last word: still cut off, never healed.
    judged = entry | {"worker_ended_at": entry["healed_at"] + 0.05}
    assert faults_of_verdict.line(judged).endswith("s after the cut, still cut off")
    assert "healed" not in faults_of_verdict.line(judged)
    restarted = entry | {"restart": 1, "cluster_failed_at": entry["healed_at"] + 0.1}
    assert ", still cut off, and restart 1 began it again" in faults_of_verdict.line(restarted)


def test_the_step_time_before_during_and_after_a_cut_is_recorded_and_said(tmp_path):
    progress, record = tmp_path / "worker-1.progress", tmp_path / "faults-worker-1.json"
    ended, stop = threading.Event(), threading.Event()

    def training():  # 20 steps a second, none while cut off.
        steps, cut_off, first = 0, False, time.time()
        while not stop.is_set():
            cut_off = bool(calls) and calls[-1] == "cut"
            if not cut_off:
                steps += 1
            write(progress, steps=steps, time=time.time(), first_step=first)
            time.sleep(0.05)

    calls = []
    trainer = threading.Thread(target=training)
    trainer.start()
    guard = threading.Timer(10, ended.set)  # Never a hang, whatever goes wrong.
    guard.daemon = True
    guard.start()
    try:
        [entry] = schedule.run(
            faults.parse("cut worker-1 at 0.6s for 0.6s"),
            progress=progress,
            record=record,
            inject=lambda fault: calls.append("cut"),
            undo=lambda fault: calls.append("heal"),
            worker="worker-1",
            ended=ended,
            say=lambda line: None,
        )
    finally:
        stop.set()
        trainer.join()
    pace = entry["step_time"]
    assert pace == json.loads(record.read_text())[0]["step_time"]
    before, during, after = (
        pace[name]["seconds"] / max(pace[name]["steps"], 1) for name in ("before", "during", "after")
    )
    assert 0.04 <= before <= 0.1 and 0.04 <= after <= 0.1, pace
    assert pace["during"]["steps"] <= 1 and during >= 0.5, pace  # A step may be on its way as the cut comes.
    said = faults_of_verdict.line(entry | {"worker_ended_at": None})
    assert re.search(
        r"; steps 0\.0\d\ds each before, (none in 0\.\ds|0\.\d+s each) during, 0\.0\d\ds each after$", said
    ), said


def test_a_link_fault_applied_by_several_shapers_is_one_line_from_the_first_of_them(tmp_path):
    fault = "worker-0,worker-1 <-> worker-2,worker-3: thin at step 5 for 3s"
    base = {"fault": fault, "kind": "link", "worker": "", "reached": True, "step": 5}
    pace = {"before": {"steps": 10, "seconds": 0.6}, "during": {"steps": 8, "seconds": 3.0}}
    applied = {"worker-0": 100.2, "worker-1": 100.0, "worker-2": 100.1, "worker-3": 100.3}
    for worker, at in applied.items():
        entry = base | {"cut_at": at, "healed_at": at + 3, "step_time": pace | {"first": worker}}
        (tmp_path / f"faults-{worker}.json").write_text(json.dumps([entry]))
        (tmp_path / f"{worker}.status").write_text("{}")
    # A cut of the same run stays its own line.
    cut = {"fault": "cut worker-1 off at step 9 for 1s", "worker": "worker-1", "reached": False}
    (tmp_path / "faults-worker-1.json").write_text(
        json.dumps([base | {"cut_at": 100.0, "healed_at": 103.0, "step_time": pace | {"first": "worker-1"}}, cut])
    )
    entries = faults_of_verdict.records(tmp_path, list(applied))
    assert [entry["fault"] for entry in entries] == [fault, cut["fault"]]
    assert entries[0]["step_time"]["first"] == "worker-1"  # The earliest applied.
    said = faults_of_verdict.line(entries[0] | {"worker_ended_at": 200.0})
    assert said == (
        f"fault: {fault}: applied at step 5, restored 3.0s later; steps 0.060s each before, 0.375s each during; "
        "the training ended 100.0s after the change"
    )
    assert faults_of_verdict.line(entries[1]) == f"fault: {cut['fault']}: not reached, the training ended first"
    assert [end["by"] for end in entries[0]["ends"]] == list(applied)
    assert faults_of_verdict.problems(entries) == (
        f"fault never injected: {cut['fault']} (the training ended before it): the run did not test it",
    )


def test_a_link_fault_one_end_applied_late_and_one_never_is_said_so(tmp_path):
    fault = "worker-0 <-> worker-1,worker-2: thin at step 5 for 3s"
    base = {"fault": fault, "kind": "link", "worker": ""}
    # worker-1's shaper was still in a fault of its own at step 5; worker-2's training ended first.
    applied = {
        "worker-0": base | {"reached": True, "step": 5, "cut_at": 100.0, "healed_at": 103.0},
        "worker-1": base | {"reached": True, "step": 9, "cut_at": 103.5, "healed_at": 106.5},
        "worker-2": base | {"reached": False},
    }
    for worker, entry in applied.items():
        (tmp_path / f"faults-{worker}.json").write_text(json.dumps([entry]))
    [entry] = faults_of_verdict.records(tmp_path, list(applied))
    assert faults_of_verdict.line(entry) == (
        f"fault: {fault}: applied at step 5, restored 3.0s later; worker-1's shaper applied it 3.5s later, at step 9"
    )
    assert faults_of_verdict.problems((entry,)) == (
        f"fault injected at only some of its ends: {fault}: not by the shaper of worker-2 (its training ended "
        "before it): the run did not test it whole",
    )
    # A poll apart is the same moment: nothing said.
    applied["worker-1"] |= {"cut_at": 100.3, "step": 5}
    (tmp_path / "faults-worker-1.json").write_text(json.dumps([applied["worker-1"]]))
    [entry] = faults_of_verdict.records(tmp_path, list(applied))
    assert faults_of_verdict.line(entry) == f"fault: {fault}: applied at step 5, restored 3.0s later"


def test_a_fault_asked_for_that_no_shaper_recorded_fails_the_verdict(tmp_path):
    asked = ["cut worker-1 off at step 5 for 1s", "worker-0 <-> worker-1: thin at epoch 2 for 3s"]
    # worker-1's shaper recorded its cut; no shaper said a word of the link's fault.
    cut = {"fault": asked[0], "kind": "cut", "worker": "worker-1", "reached": True, "cut_at": 10.0, "step": 5}
    (tmp_path / "faults-worker-1.json").write_text(json.dumps([cut | {"healed_at": 11.0}]))
    entries = faults_of_verdict.records(tmp_path, ["worker-0", "worker-1"], asked=asked)
    assert [(entry["fault"], entry.get("recorded", True)) for entry in entries] == [(asked[0], True), (asked[1], False)]
    assert faults_of_verdict.line(entries[1]) == (
        "fault: worker-0 <-> worker-1: thin at epoch 2 for 3s: no shaper recorded it, injected or not"
    )
    assert faults_of_verdict.problems(entries) == (
        "fault never recorded: worker-0 <-> worker-1: thin at epoch 2 for 3s: no shaper of its workers said it "
        "injected it, or that the training ended first: the run did not test it",
    )
    # Every one recorded: nothing added, nothing failed.
    assert faults_of_verdict.records(tmp_path, ["worker-0", "worker-1"], asked=asked[:1]) == entries[:1]
    assert faults_of_verdict.problems(entries[:1]) == ()

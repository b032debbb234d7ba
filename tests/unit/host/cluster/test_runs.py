"""A run's own Compose project and folder (tfcluster/cluster/runs.py): claimed while it runs, the
next free one when another run holds the default, refused when the one asked for is taken."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from tfcluster.cluster import runs, steps
from tfcluster.errors import Refusal


def nobody_elses(_name, _root):
    return []


def test_the_default_name_is_taken_when_free_and_the_next_one_while_another_run_holds_it(tmp_path):
    first = runs.claim(tmp_path, "tfcluster", given=False, foreign=nobody_elses)
    second = runs.claim(tmp_path, "tfcluster", given=False, foreign=nobody_elses)
    assert (first.slot, second.slot) == ("tfcluster", "tfcluster-2")
    assert (tmp_path / ".tfcluster/runs/tfcluster-2/lock").is_file()
    first.release()
    # Released, the default is free again.
    third = runs.claim(tmp_path, "tfcluster", given=False, foreign=nobody_elses)
    assert third.slot == "tfcluster"


def test_a_name_asked_for_is_refused_while_another_run_holds_it(tmp_path):
    held = runs.claim(tmp_path, "mine", given=True, foreign=nobody_elses)
    with pytest.raises(Refusal, match="another run of this checkout is running as the Compose project 'mine'"):
        runs.claim(tmp_path, "mine", given=True, foreign=nobody_elses)
    held.release()


def test_a_project_name_another_checkouts_containers_carry_is_passed_over_or_refused(tmp_path):
    def elsewhere(name, _root):
        return ["/home/someone/other-checkout"] if name == "tfcluster" else []

    assert runs.claim(tmp_path, "tfcluster", given=False, foreign=elsewhere).slot == "tfcluster-2"
    with pytest.raises(Refusal, match=r"has containers of another checkout \(/home/someone/other-checkout\)"):
        runs.claim(tmp_path, "tfcluster", given=True, foreign=elsewhere)


def test_a_run_that_died_leaves_its_slot_free(tmp_path):
    # Another process holds the default's lock, as a live run does; the kernel frees it when it ends.
    (tmp_path / ".tfcluster/runs/tfcluster").mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); "
            "sys.stdin.read()",
            str(tmp_path / ".tfcluster/runs/tfcluster/lock"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        taken = runs.claim(tmp_path, "tfcluster", given=False, foreign=nobody_elses)
        assert taken.slot == "tfcluster-2"
        taken.release()
    finally:
        holder.kill()
        holder.wait()
    assert runs.claim(tmp_path, "tfcluster", given=False, foreign=nobody_elses).slot == "tfcluster"


def test_when_every_slot_is_held_the_run_is_refused_with_how_many(tmp_path):
    held = [runs.claim(tmp_path, "tfcluster", given=False, foreign=nobody_elses) for _ in range(runs.MOST_SLOTS)]
    with pytest.raises(Refusal, match=f"{runs.MOST_SLOTS} runs of this checkout are running at once"):
        runs.claim(tmp_path, "tfcluster", given=False, foreign=nobody_elses)
    for claim in held:
        claim.release()


def test_a_slots_folder_is_removed_only_when_no_run_holds_it(tmp_path):
    held = runs.claim(tmp_path, "mine", given=True, foreign=nobody_elses)
    (tmp_path / ".tfcluster/runs/mine/env").write_text("SECRET=1\n")
    assert not runs.remove_folder(tmp_path, "mine")
    assert (tmp_path / ".tfcluster/runs/mine/env").is_file()
    held.release()
    assert runs.remove_folder(tmp_path, "mine")
    # All but the lock: a run claiming the slot now may have opened that very file.
    assert [path.name for path in (tmp_path / ".tfcluster/runs/mine").iterdir()] == ["lock"]
    assert runs.remove_folder(tmp_path, "never-used")


def test_a_slot_is_held_only_while_a_run_holds_its_lock(tmp_path):
    assert not runs.held(tmp_path, "mine")
    claim = runs.claim(tmp_path, "mine", given=True, foreign=nobody_elses)
    assert runs.held(tmp_path, "mine")
    claim.release()
    assert not runs.held(tmp_path, "mine")


def test_the_names_record_on_this_host_says_who_claimed_it_when_and_once_it_ended_when_it_ended(tmp_path):
    lock = runs.record_path("mine")  # Outside the checkout: a CI runner deletes the action's folder.
    assert not lock.is_relative_to(tmp_path)
    claim = runs.claim(tmp_path, "mine", given=True, foreign=nobody_elses)
    began = runs.record_of(lock)
    assert set(began) == {"pid", "since", "root"} and (began["pid"], began["root"]) == (os.getpid(), str(tmp_path))
    claim.release()
    ended = runs.record_of(lock)
    assert ended["since"] == began["since"] and ended["ended"] >= began["since"]
    # A file of an earlier version (the pid alone), or none, says nothing.
    lock.write_text("4242\n")
    assert runs.record_of(lock) == {}
    assert runs.record_of(tmp_path / "nowhere") == {}


def test_a_name_another_checkouts_containers_took_during_the_set_up_stops_the_run_before_up(
    recorded, monkeypatch, capsys
):
    # Free when claimed, and so when the last run's `down` began with the set-up (which may then
    # run for minutes); another checkout's by the time the cluster would come up.
    monkeypatch.setattr(steps, "runs", SimpleNamespace(foreign_checkouts=lambda _name, _root: ["/home/someone/other"]))
    status, recorder = recorded([])
    assert status == 2
    verbs = [command[2] for command, _options in recorder.commands if command[0] == "docker"]
    assert verbs == ["down"], verbs  # Theirs were not there then, and are left as they are.
    assert (
        "run: the Compose project 'tfcluster' has had containers of another checkout (/home/someone/other) since "
        "this run claimed it: this run stops here and leaves them; give it another name (--name)\n"
    ) in capsys.readouterr().err


def test_a_name_another_checkouts_containers_took_while_the_run_trained_fails_it_after_its_stop(
    recorded, monkeypatch, capsys
):
    asked = []

    def foreign(_name, _root):  # Free at the claim and before `down`; another checkout's by the end.
        asked.append(1)
        return ["/home/someone/other"] if len(asked) > 1 else []

    monkeypatch.setattr(steps, "runs", SimpleNamespace(foreign_checkouts=foreign))
    status, recorder = recorded([])
    assert status == 2
    verbs = [command[2] for command, _options in recorder.commands if command[0] == "docker"]
    assert verbs == ["down", "up", "stop"], verbs  # Stopped as any run is, then failed.
    assert (
        "run: the Compose project 'tfcluster' had containers of another checkout (/home/someone/other) while this "
        "run trained: its verdict may be of both clusters, so the run fails; give each its own name (--name)\n"
    ) in capsys.readouterr().err


def test_a_name_a_live_run_of_another_checkout_on_this_host_holds_is_passed_over_or_refused(tmp_path):
    # Another checkout's run (another root, so its own slot locks) holds the name's record on this host.
    elsewhere = runs.claim(tmp_path / "other-checkout", "tfcluster", given=False, foreign=nobody_elses)
    try:
        assert runs.claim(tmp_path / "here", "tfcluster", given=False, foreign=nobody_elses).slot == "tfcluster-2"
        with pytest.raises(Refusal, match="a run from another checkout on this host is running as the Compose project"):
            runs.claim(tmp_path / "here", "tfcluster", given=True, foreign=nobody_elses)
    finally:
        elsewhere.release()

"""The checkpoint store's commit protocol, with a stand-in for TensorFlow's `write(prefix)`."""

import os
from pathlib import Path

import pytest

from trainer.training import checkpoints, faults
from trainer.training.checkpoints import Store


def fake_write(prefix: str) -> None:
    """What tf.train.Checkpoint.write leaves: an index and a data file beside the prefix."""
    Path(prefix + ".index").write_text("index")
    Path(prefix + ".data-00000-of-00001").write_text("data")


def chief(directory, **keywords):
    said = []
    return Store(directory, is_chief=True, say=said.append, **keywords), said


def test_a_saved_step_is_the_latest_complete_checkpoint(tmp_path):
    store, said = chief(tmp_path)
    assert store.latest() is None
    store.save(4, fake_write)
    store.save(8, fake_write)
    step, prefix = store.latest()
    assert step == 8
    assert prefix == tmp_path / "step-00000008" / checkpoints.PREFIX
    assert sorted(os.listdir(prefix.parent)) == ["state.data-00000-of-00001", "state.index"]
    assert said[0] == "checkpoint | saving step 4"
    assert said[1].startswith("checkpoint | step 4 saved to ")


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    store, _ = chief(tmp_path)
    for step in (4, 8, 12, 16):
        store.save(step, fake_write)
    assert checkpoints.complete_steps(tmp_path) == [12, 16]


def test_a_save_that_dies_before_its_commit_is_never_loaded_and_is_cleared(tmp_path):
    store, _ = chief(tmp_path)
    store.save(4, fake_write)

    def dies_half_way(prefix):
        Path(prefix + ".index").write_text("index")
        raise KeyboardInterrupt  # Stands for the kill: the save stops here.

    with pytest.raises(KeyboardInterrupt):
        store.save(8, dies_half_way)
    assert store.latest()[0] == 4  # The half-written step 8 is not a checkpoint.
    assert (tmp_path / ".partial-step-00000008").is_dir()

    restarted, said = chief(tmp_path)
    assert restarted.latest()[0] == 4
    assert not (tmp_path / ".partial-step-00000008").exists()
    assert said == ["checkpoint | removing .partial-step-00000008, left by a save that never finished"]


def test_other_workers_write_and_keep_nothing(tmp_path):
    written = []

    def write(prefix):
        fake_write(prefix)
        written.append(Path(prefix).parent)

    store = Store(tmp_path / "shared", is_chief=False, say=print)
    store.save(4, write)
    assert written and not written[0].exists()  # Its own temporary directory, deleted.
    assert not (tmp_path / "shared").exists()  # It never touches the chief's directory.


def test_a_commit_delay_is_announced(tmp_path):
    store, said = chief(tmp_path, commit_delay=0.01)
    store.save(4, fake_write)
    assert "checkpoint | step 4 written, committing in 0.01s (a fault asked for)" in said
    assert store.latest()[0] == 4


def test_unrelated_files_are_not_checkpoints(tmp_path):
    (tmp_path / "step-12").mkdir()  # Too few digits to be one of ours.
    (tmp_path / "notes.txt").write_text("")
    assert checkpoints.complete_steps(tmp_path) == []
    assert checkpoints.complete_steps(tmp_path / "absent") == []


class Crashed(Exception):
    """Stands for os._exit, which would end the test run itself."""


def test_the_exit_fault_ends_the_process_after_its_step_only(monkeypatch):
    exits = []

    def exit_now(code):
        exits.append(code)
        raise Crashed

    monkeypatch.setattr(faults.os, "_exit", exit_now)
    said = []
    on_step = faults.exit_after(6, said.append)
    for step in range(1, 6):
        on_step(step)
    assert exits == [] and said == []
    with pytest.raises(Crashed):
        on_step(6)
    assert exits == [1]
    assert said == ["fault | exiting 1 after step 6, as TFCLUSTER_FAULT_EXIT_AT_STEP asks"]


def test_a_checkpoint_that_does_not_fit_leaves_the_newest_one_as_it_was_and_says_so(tmp_path):
    store, _ = chief(tmp_path)
    store.save(4, fake_write)

    def fills_the_volume(prefix: str) -> None:
        Path(prefix + ".index").write_text("index")
        # As TensorFlow reports its file system's ENOSPC: in the message of an error of its own.
        raise RuntimeError(f"{prefix}.data-00000-of-00001; No space left on device")

    with pytest.raises(checkpoints.CheckpointDidNotFit) as refused:
        store.save(8, fills_the_volume)
    message = str(refused.value)
    assert message.startswith(f"checkpoint | step 8 does not fit in the checkpoints volume {tmp_path} (")
    assert message.endswith(
        "TF_CHECKPOINTS_SIZE): partial files removed; step 4 (the newest complete checkpoint) is intact"
    )
    # Nothing of the failed save is left; the one before is whole.
    assert sorted(os.listdir(tmp_path)) == ["step-00000004"]
    assert sorted(os.listdir(tmp_path / "step-00000004")) == ["state.data-00000-of-00001", "state.index"]


def test_a_failed_write_that_is_not_for_space_is_no_full_volume(tmp_path):
    store, _ = chief(tmp_path)

    def breaks(_prefix: str) -> None:
        raise ValueError("a bug of the program's")

    with pytest.raises(ValueError, match="a bug"):
        store.save(4, breaks)

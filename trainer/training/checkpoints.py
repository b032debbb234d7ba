"""Checkpoints a crash can never leave half-written, kept by TensorFlow's multi-worker rules.

Every worker writes each checkpoint, because saving mirrored and sync-on-read variables takes part
in collectives; only the chief's copy is kept, and the others write to a temporary directory of
their own and delete it (the TF multi-worker guide's rule). The chief writes into
`.partial-step-N` and renames it to `step-N` once every file is on disk: a rename within one file
system is atomic, so a `step-N` directory is always whole, and a crash in the middle of a save
leaves only a partial directory, which the next start ignores and removes.

A checkpoint that does not fit in its volume (compose.yaml's `checkpoints`, a tmpfs of
TF_CHECKPOINTS_SIZE) fails as cleanly: its partial directory is removed, the newest complete
checkpoint is left as it was, and `CheckpointDidNotFit` says so, with the volume's size and what
was left of it; the trainer exits 12 on it, which the keeper does not restart (a restart would fill
the volume again at the same step).

This module knows nothing of TensorFlow: it is given the checkpoint's `write(prefix)`.
"""

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from trainer.contract import space
from trainer.contract.usage import size_text

# tf.train.Checkpoint.write(DIR/state) makes DIR/state.index and DIR/state.data-*.
PREFIX = "state"
# Complete checkpoints kept: the newest, which a restart loads, and the one before it, for a
# person to fall back on by hand.
KEEP = 2
_COMPLETE = re.compile(r"^step-(\d{8,})$")
_PARTIAL = ".partial-"


# How TensorFlow's file system reports ENOSPC: in its error's message (its errors are no OSError).
_NO_SPACE = "No space left on device"


class CheckpointDidNotFit(Exception):
    """A save the checkpoints volume had no room for; its message is the line to print."""


class Store:
    def __init__(
        self,
        directory: Path,
        *,
        is_chief: bool,
        say: Callable[[str], None],
        commit_delay: float = 0.0,
    ):
        self.directory = directory
        self._is_chief = is_chief
        self._say = say
        self._commit_delay = commit_delay
        if is_chief:
            directory.mkdir(parents=True, exist_ok=True)
            for partial in directory.glob(_PARTIAL + "*"):
                self._say(f"checkpoint | removing {partial.name}, left by a save that never finished")
                shutil.rmtree(partial, ignore_errors=True)

    def latest(self) -> tuple[int, Path] | None:
        """The newest complete checkpoint, as (step, prefix to read), or None."""
        steps = complete_steps(self.directory)
        if not steps:
            return None
        step = steps[-1]
        return step, self.directory / step_name(step) / PREFIX

    def save(self, step: int, write: Callable[[str], object]) -> None:
        if not self._is_chief:
            # Written for the collectives' sake, and thrown away.
            with tempfile.TemporaryDirectory(prefix="tfcluster-checkpoint-") as scratch:
                write(os.path.join(scratch, PREFIX))
            return
        started = time.monotonic()
        partial = self.directory / f"{_PARTIAL}{step_name(step)}"
        shutil.rmtree(partial, ignore_errors=True)
        self._say(f"checkpoint | saving step {step}")
        try:
            partial.mkdir()
            write(str(partial / PREFIX))
            _sync_directory_files(partial)
        except Exception as error:
            if not _no_space(error):
                raise
            shutil.rmtree(partial, ignore_errors=True)
            raise CheckpointDidNotFit(self._did_not_fit(step)) from None
        if self._commit_delay:
            self._say(f"checkpoint | step {step} written, committing in {self._commit_delay:g}s (a fault asked for)")
            time.sleep(self._commit_delay)
        # Never there already: a restart resumes from the newest complete step and saves only later
        # ones. If it were, the rename fails rather than mix two checkpoints.
        final = self.directory / step_name(step)
        os.rename(partial, final)
        _fsync(self.directory)
        self._say(f"checkpoint | step {step} saved to {final} in {time.monotonic() - started:.2f}s")
        for old in complete_steps(self.directory)[:-KEEP]:
            shutil.rmtree(self.directory / step_name(old), ignore_errors=True)

    def _did_not_fit(self, step: int) -> str:
        steps = complete_steps(self.directory)
        kept = f"step {steps[-1]} (the newest complete checkpoint) is intact" if steps else "none was saved before"
        try:
            info = os.statvfs(self.directory)
            room = f"{size_text(info.f_blocks * info.f_frsize)}, {size_text(info.f_bavail * info.f_frsize)} free"
        except OSError:
            room = "its size unknown"
        return (
            f"checkpoint | step {step} does not fit in the checkpoints volume {self.directory} ({room}; "
            f"TF_CHECKPOINTS_SIZE): partial files removed; {kept}"
        )


def _no_space(error: Exception) -> bool:
    return space.out_of_room(error) or _NO_SPACE in str(error)


def step_name(step: int) -> str:
    return f"step-{step:08d}"


def complete_steps(directory: Path) -> list[int]:
    """The steps of the complete checkpoints in `directory`, in order."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(match.group(1)) for match in map(_COMPLETE.match, names) if match)


def _sync_directory_files(directory: Path) -> None:
    """Every file on disk before the rename makes the checkpoint visible (a host crash, not only ours)."""
    for path in directory.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    _fsync(directory)


def _fsync(directory: Path) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)

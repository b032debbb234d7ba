"""Checkpoints as TensorFlow's multi-worker guide writes them: every worker saves (the save is a
collective), only the chief's copy is kept; the others write to a scratch directory of their own."""

import json
import os
import tempfile

import tensorflow as tf


def directories(base: str) -> tuple[str, bool]:
    """(where this worker writes, whether it is the chief), from TF_CONFIG."""
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    if index == 0:
        return base, True
    return tempfile.mkdtemp(prefix=f"worker-{index}-"), False


def manager_for(checkpoint: tf.train.Checkpoint, base: str) -> tuple[tf.train.CheckpointManager, bool]:
    directory, is_chief = directories(base)
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=2), is_chief


def restore_latest(checkpoint: tf.train.Checkpoint, base: str) -> None:
    """Every worker restores the chief's newest checkpoint, so that all resume from the same step."""
    latest = tf.train.latest_checkpoint(base)
    if latest:
        checkpoint.restore(latest).expect_partial()
        print(f"custom-loop: resumed from {latest}", flush=True)

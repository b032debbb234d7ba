"""Where training starts: at step 0, or at the newest complete checkpoint, the same on every worker."""

from collections.abc import Callable

import tensorflow as tf

from trainer.training.checkpoints import Store
from trainer.training.output import start_json


class ResumeMismatch(Exception):
    """The workers found different checkpoints to resume from."""


def start_step(
    strategy: tf.distribute.Strategy,
    checkpoint: tf.train.Checkpoint,
    *,
    store: Store | None,
    say: Callable[[str], None],
) -> int:
    """Restores the newest checkpoint into `checkpoint`, if there is one, and returns its step.

    Each start is announced twice: the store's line for people, and a JSON event for the verifier,
    which counts the starts of a restarted cluster (trainer/verifier/recovery.py). The event comes
    before the agreement, as the line does, so that a start that fails to agree is counted too.
    """
    if not store:  # Without checkpoints every worker starts at 0: nothing to agree on.
        say(start_json(0))
        return 0
    step = _restore(store, checkpoint, say)
    say(start_json(step))
    _agree_on_start(strategy, step)
    return step


def _restore(store: Store, checkpoint: tf.train.Checkpoint, say: Callable[[str], None]) -> int:
    latest = store.latest()
    if latest is None:
        say(f"checkpoint | none in {store.directory}: starting at step 0")
        return 0
    step, prefix = latest
    checkpoint.read(prefix).assert_existing_objects_matched()
    say(f"checkpoint | resuming from step {step} ({prefix.parent})")
    return step


def _agree_on_start(strategy: tf.distribute.Strategy, step: int) -> None:
    """One collective before training: every worker must resume from the same step.

    Workers that do not share the checkpoint directory would otherwise train out of step, silently.
    """
    value = tf.constant([step, step * step], dtype=tf.int64)

    @tf.function  # Eagerly, the strategy warns of its overhead.
    def sum_over_workers():
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: value), axis=None)

    totals = sum_over_workers().numpy()
    workers = strategy.num_replicas_in_sync
    if workers * int(totals[1]) != int(totals[0]) ** 2:  # Equal only when every step is the same.
        raise ResumeMismatch(
            f"the workers would resume from different steps (this one from {step}, the mean is "
            f"{int(totals[0]) / workers:g}): every worker must see the chief's TF_CHECKPOINT_DIR"
        )

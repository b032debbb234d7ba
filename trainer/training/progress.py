"""The training's progress as a checkpoint carries it: each worker's own bookkeeping beside the model.

Plain variables, identical on every worker and kept outside the strategy's scope: the step a
checkpoint was saved at, the running epoch's summed loss at that step, and each finished epoch's
loss and accuracy, so that a resumed run reports the epochs it did not train itself.
"""

import dataclasses

import tensorflow as tf

from trainer.training.model import TrainingState
from trainer.training.outcome import EpochResult


@dataclasses.dataclass(frozen=True, kw_only=True)
class Progress:
    step_done: tf.Variable
    epoch_loss_sum: tf.Variable
    epoch_losses: tf.Variable
    epoch_accuracies: tf.Variable

    def finished_epochs(self, count: int) -> list[EpochResult]:
        """The first `count` epochs' results, as a checkpoint brought them back."""
        return [
            EpochResult(
                epoch=epoch, loss=float(self.epoch_losses[epoch - 1]), accuracy=float(self.epoch_accuracies[epoch - 1])
            )
            for epoch in range(1, count + 1)
        ]

    def record_epoch(self, result: EpochResult) -> None:
        self.epoch_losses[result.epoch - 1].assign(result.loss)
        self.epoch_accuracies[result.epoch - 1].assign(result.accuracy)


def new_progress(epochs: int) -> Progress:
    # Created one by one, in this order, as they always were.
    step_done = tf.Variable(0, dtype=tf.int64, trainable=False)
    epoch_loss_sum = tf.Variable(0.0, dtype=tf.float32, trainable=False)
    epoch_losses = tf.Variable(tf.zeros([epochs], tf.float64), trainable=False)
    epoch_accuracies = tf.Variable(tf.zeros([epochs], tf.float64), trainable=False)
    return Progress(
        step_done=step_done,
        epoch_loss_sum=epoch_loss_sum,
        epoch_losses=epoch_losses,
        epoch_accuracies=epoch_accuracies,
    )


def checkpoint_of(state: TrainingState, progress: Progress) -> tf.train.Checkpoint:
    """The whole training state; its keys are what earlier checkpoints were written under."""
    return tf.train.Checkpoint(
        model=state.model,
        optimizer=state.optimizer,
        # Keras 3 metrics are not trackable themselves; their variables are.
        accuracy={variable.name: variable.value for variable in state.accuracy.variables},
        step=progress.step_done,
        epoch_loss_sum=progress.epoch_loss_sum,
        epoch_losses=progress.epoch_losses,
        epoch_accuracies=progress.epoch_accuracies,
    )

"""The step function: one synchronized training step, every replica's loss all-reduced."""

import tensorflow as tf

from trainer.training.model import TrainingState


def make_train_step(strategy: tf.distribute.Strategy, state: TrainingState, *, global_batch_size: int):
    """A `tf.function` that takes the next global batch from `iterator`, trains on it, returns the loss."""

    @tf.function
    def train_step(iterator):
        def replica_step(inputs):
            features, labels = inputs
            with tf.GradientTape() as tape:
                predictions = state.model(features, training=True)
                per_example_loss = state.loss_object(labels, predictions)
                loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=global_batch_size)
            gradients = tape.gradient(loss, state.model.trainable_variables)
            state.optimizer.apply_gradients(zip(gradients, state.model.trainable_variables, strict=False))
            state.accuracy.update_state(labels, predictions)
            return loss

        per_replica_losses = strategy.run(replica_step, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

    return train_step

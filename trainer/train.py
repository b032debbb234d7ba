"""The synchronized training loop: one strategy.run per step, every replica loss all-reduced."""

from collections.abc import Callable

import tensorflow as tf

from trainer.cluster import Cluster
from trainer.data import make_dataset_fn
from trainer.model import build_state
from trainer.result import EpochResult, TrainingResult
from trainer.settings import TrainingSettings


def train(
    cluster: Cluster, settings: TrainingSettings, *, on_epoch: Callable[[EpochResult, int], None]
) -> TrainingResult:
    """Runs the whole training; TF_CONFIG must already describe `cluster` in the environment.

    Keras 3's `Model.fit` is broken under MultiWorkerMirroredStrategy (keras-team/keras#20585),
    so this is a custom loop, as in the tutorial.
    """
    global_batch_size = settings.global_batch_size(cluster.size)
    # Constructing the strategy starts this worker's collective runtime and joins the cluster.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    tf.keras.utils.set_random_seed(settings.seed)
    state = build_state(strategy, learning_rate=settings.learning_rate)
    dataset = strategy.distribute_datasets_from_function(
        make_dataset_fn(seed=settings.seed, global_batch_size=global_batch_size)
    )
    iterator = iter(dataset)

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

    epochs = []
    step = 0
    for epoch in range(1, settings.epochs + 1):
        state.accuracy.reset_state()
        total_loss = 0.0
        for _ in range(settings.steps_per_epoch):
            total_loss += train_step(iterator)
            step += 1
        result = EpochResult(
            epoch=epoch,
            loss=float(total_loss / settings.steps_per_epoch),
            accuracy=float(state.accuracy.result()),
        )
        epochs.append(result)
        on_epoch(result, step)

    return TrainingResult(
        worker=cluster.index,
        workers=cluster.size,
        replicas=int(strategy.num_replicas_in_sync),
        epochs=tuple(epochs),
        steps=step,
    )

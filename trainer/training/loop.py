"""The synchronized training loop: one strategy.run per step, every replica loss all-reduced.

With a checkpoint store it saves the whole training state at every interval and, on start,
resumes from the newest complete checkpoint at the exact step: the weights, the optimizer's
moments and step count, the running epoch's metric and loss, the finished epochs' results, and
the data position (the input pipeline's order is fixed, so the step says where it was).
"""

import os
from collections.abc import Callable

import tensorflow as tf

from trainer.contract.cluster import Cluster
from trainer.contract.settings import TrainingSettings
from trainer.training.checkpoints import Store
from trainer.training.data import make_dataset_fn
from trainer.training.model import build_state
from trainer.training.outcome import EpochResult, TrainingResult


class ResumeMismatch(Exception):
    """The workers found different checkpoints to resume from."""


def train(
    cluster: Cluster,
    settings: TrainingSettings,
    *,
    on_epoch: Callable[[EpochResult, int], None],
    say: Callable[[str], None],
    store: Store | None = None,
    fault_exit_at_step: int = 0,
) -> TrainingResult:
    """Runs the whole training; TF_CONFIG must already describe `cluster` in the environment.

    Keras 3's `Model.fit` is broken under MultiWorkerMirroredStrategy (keras-team/keras#20585),
    so this is a custom loop, as in the tutorial.
    """
    # Bit-identical results run to run, which is what makes a resumed run comparable at all.
    tf.config.experimental.enable_op_determinism()
    global_batch_size = settings.global_batch_size(cluster.size)
    # Constructing the strategy starts this worker's collective runtime and joins the cluster.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    tf.keras.utils.set_random_seed(settings.seed)
    state = build_state(strategy, learning_rate=settings.learning_rate)
    # Each worker's own bookkeeping, identical everywhere: plain variables, outside the scope.
    step_done = tf.Variable(0, dtype=tf.int64, trainable=False)
    epoch_loss_sum = tf.Variable(0.0, dtype=tf.float32, trainable=False)
    epoch_losses = tf.Variable(tf.zeros([settings.epochs], tf.float64), trainable=False)
    epoch_accuracies = tf.Variable(tf.zeros([settings.epochs], tf.float64), trainable=False)
    checkpoint = tf.train.Checkpoint(
        model=state.model,
        optimizer=state.optimizer,
        # Keras 3 metrics are not trackable themselves; their variables are.
        accuracy={variable.name: variable.value for variable in state.accuracy.variables},
        step=step_done,
        epoch_loss_sum=epoch_loss_sum,
        epoch_losses=epoch_losses,
        epoch_accuracies=epoch_accuracies,
    )

    step = 0
    if store:  # Without checkpoints every worker starts at 0: nothing to agree on.
        step = _restore(store, checkpoint, say)
        _agree_on_start(strategy, step)
    dataset = strategy.distribute_datasets_from_function(
        make_dataset_fn(seed=settings.seed, global_batch_size=global_batch_size, skip_batches=step)
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

    spe = settings.steps_per_epoch
    done_epochs = step // spe
    epochs = [
        EpochResult(epoch=epoch, loss=float(epoch_losses[epoch - 1]), accuracy=float(epoch_accuracies[epoch - 1]))
        for epoch in range(1, done_epochs + 1)
    ]
    for epoch in range(done_epochs + 1, settings.epochs + 1):
        if step % spe == 0:
            state.accuracy.reset_state()
            total_loss = 0.0
        else:  # Resumed within this epoch: its metric state came back with the checkpoint.
            total_loss = tf.constant(epoch_loss_sum.numpy())
        while step < epoch * spe:
            total_loss += train_step(iterator)
            step += 1
            if step == fault_exit_at_step:
                say(f"fault | exiting 1 after step {step}, as TFCLUSTER_FAULT_EXIT_AT_STEP asks")
                os._exit(1)  # A crash: no cleanup, no goodbye to the peers.
            if step % spe == 0:
                result = EpochResult(epoch=epoch, loss=float(total_loss / spe), accuracy=float(state.accuracy.result()))
                epochs.append(result)
                epoch_losses[epoch - 1].assign(result.loss)
                epoch_accuracies[epoch - 1].assign(result.accuracy)
                on_epoch(result, step)
            if store and step % settings.checkpoint_interval == 0 and step < settings.total_steps:
                step_done.assign(step)
                epoch_loss_sum.assign(total_loss)
                store.save(step, checkpoint.write)

    return TrainingResult(
        worker=cluster.index,
        workers=cluster.size,
        replicas=int(strategy.num_replicas_in_sync),
        epochs=tuple(epochs),
        steps=step,
    )


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

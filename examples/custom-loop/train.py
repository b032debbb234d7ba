"""A custom multi-worker training loop that checkpoints every epoch and resumes from the newest.

Run on the cluster with `scripts/run --project examples/custom-loop`. It uses Keras 3 (the
image's default): a custom loop with `strategy.run` works under MultiWorkerMirroredStrategy.
Checkpoints go to TF_CHECKPOINT_DIR (the cluster's shared checkpoints volume), so a cluster
restarted after a lost worker (scripts/run --recover) resumes at the last finished epoch.
"""

import json
import os
import sys

import tensorflow as tf
from loopdemo import checkpointing, data, model

from trainer.reporting import report_final

EPOCHS = int(os.environ.get("LOOP_EPOCHS") or 4)
STEPS_PER_EPOCH = int(os.environ.get("LOOP_STEPS_PER_EPOCH") or 10)
PER_WORKER_BATCH_SIZE = 32
SEED = 5


def main() -> int:
    workers = len(json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"])
    global_batch_size = PER_WORKER_BATCH_SIZE * workers
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    tf.keras.utils.set_random_seed(SEED)
    with strategy.scope():
        network, optimizer = model.build(learning_rate=0.02)
        loss_object = tf.keras.losses.BinaryCrossentropy(reduction=tf.keras.losses.Reduction.NONE)
        accuracy = tf.keras.metrics.BinaryAccuracy()
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
    checkpoint = tf.train.Checkpoint(model=network, optimizer=optimizer, epoch=epoch)
    base = os.path.join(os.environ.get("TF_CHECKPOINT_DIR") or "/tmp", "custom-loop")
    checkpointing.restore_latest(checkpoint, base)
    manager, is_chief = checkpointing.manager_for(checkpoint, base)

    dataset = strategy.distribute_datasets_from_function(
        data.dataset_fn_for(global_batch_size=global_batch_size, seed=SEED)
    )
    iterator = iter(dataset)

    @tf.function
    def train_step(iterator):
        def replica_step(inputs):
            features, labels = inputs
            with tf.GradientTape() as tape:
                predictions = network(features, training=True)
                loss = tf.nn.compute_average_loss(loss_object(labels, predictions), global_batch_size=global_batch_size)
            gradients = tape.gradient(loss, network.trainable_variables)
            optimizer.apply_gradients(zip(gradients, network.trainable_variables, strict=True))
            accuracy.update_state(labels, predictions)
            return loss

        return strategy.reduce(
            tf.distribute.ReduceOp.SUM, strategy.run(replica_step, args=(next(iterator),)), axis=None
        )

    losses = []
    while int(epoch) < EPOCHS:
        accuracy.reset_state()
        total = 0.0
        for _ in range(STEPS_PER_EPOCH):
            total += float(train_step(iterator))
        losses.append(total / STEPS_PER_EPOCH)
        epoch.assign_add(1)
        print(
            f"custom-loop: epoch {int(epoch)}/{EPOCHS} loss {losses[-1]:.4f} accuracy {float(accuracy.result()):.4f}",
            flush=True,
        )
        manager.save()  # Every worker saves: the save may be a collective; only the chief's is kept.
        if not is_chief:
            tf.io.gfile.rmtree(manager.directory)

    if not losses:
        print("custom-loop: nothing left to train: the checkpoint is of the last epoch", file=sys.stderr)
        return 3
    # The final metrics as the verifier reads them, in one line (the image provides trainer.reporting).
    report_final(
        {"initial_loss": losses[0], "final_loss": losses[-1], "final_accuracy": float(accuracy.result())},
        strategy=strategy,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

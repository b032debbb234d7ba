"""Multi-worker Keras `model.fit`, as in TensorFlow's "Multi-worker training with Keras" tutorial.

Run on the cluster with `scripts/run --project examples/keras-fit --data examples/keras-fit/data
--env TF_USE_LEGACY_KERAS=1`: Keras 3's `fit` does not work under MultiWorkerMirroredStrategy
(keras-team/keras#20585), and TF_USE_LEGACY_KERAS=1 makes `tf.keras` the tf-keras package the
image carries. Nothing in this project knows about the cluster beyond TF_CONFIG, which every
worker is given, and the checkpoint directory, where BackupAndRestore keeps its state.
"""

import json
import os
import sys

import tensorflow as tf
from fitdemo import config, data, model

from trainer.reporting import final_metrics_callback


def main() -> int:
    settings = config.load()
    workers = len(json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    tf.keras.utils.set_random_seed(settings.seed)
    tf.config.experimental.enable_op_determinism()

    features, labels = data.load_points(data.data_directory())
    dataset = data.make_dataset(
        features, labels, global_batch_size=settings.per_worker_batch_size * workers, seed=settings.seed
    )
    with strategy.scope():
        network = model.build_and_compile(features=features.shape[1], learning_rate=settings.learning_rate)

    # A worker lost mid-training restarts with the others (scripts/run --recover) and resumes
    # from the last finished epoch, which BackupAndRestore keeps on the shared checkpoints volume.
    backup = os.path.join(os.environ.get("TF_CHECKPOINT_DIR") or "/tmp", "keras-fit-backup")
    history = network.fit(
        dataset,
        epochs=settings.epochs,
        steps_per_epoch=settings.steps_per_epoch,
        # The final metrics as the verifier reads them, in one line (the image provides trainer.reporting).
        callbacks=[tf.keras.callbacks.BackupAndRestore(backup_dir=backup), final_metrics_callback()],
        verbose=2,
    )
    accuracy = history.history["accuracy"][-1]
    if not accuracy > settings.min_accuracy:
        print(f"keras-fit: final accuracy {accuracy:.4f} is not above {settings.min_accuracy}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())

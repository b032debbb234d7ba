"""The tutorial's deterministic synthetic dataset, sharded across workers with InputContext."""

import numpy as np
import tensorflow as tf

EXAMPLES = 256
FEATURES = 8


def synthetic_examples(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A linearly separable binary task: the label is the sign of a fixed weighted sum."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(EXAMPLES, FEATURES)).astype("float32")
    scores = features[:, 0] * 0.8 + features[:, 1] * 0.6 - features[:, 2] * 0.4 + features[:, 3] * 0.2
    labels = (scores > 0).astype("float32")[:, None]
    return features, labels


def make_dataset_fn(*, seed: int, global_batch_size: int, skip_batches: int = 0):
    """Returns the `dataset_fn` that `distribute_datasets_from_function` calls on each worker.

    The order is the same every time (a fixed seed, no reshuffling), so a run resumed after
    `skip_batches` steps sees exactly the batches an uninterrupted run would.
    """
    features, labels = synthetic_examples(seed)

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        return (
            tf.data.Dataset.from_tensor_slices((features, labels))
            # Each worker reads a disjoint shard, so the all-reduce really combines different data.
            .shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
            .shuffle(EXAMPLES, seed=seed, reshuffle_each_iteration=False)
            .repeat()
            .batch(batch_size)
            .skip(skip_batches)
            .prefetch(tf.data.AUTOTUNE)
        )

    return dataset_fn

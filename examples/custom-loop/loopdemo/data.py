"""Deterministic synthetic data, sharded across the workers' input pipelines."""

import numpy as np
import tensorflow as tf


def dataset_fn_for(*, global_batch_size: int, seed: int):
    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        rng = np.random.default_rng(seed)
        features = rng.normal(size=(1024, 10)).astype("float32")
        weights = np.linspace(1.0, -1.0, 10).astype("float32")
        labels = (features @ weights > 0).astype("float32")[:, None]
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        return (
            tf.data.Dataset.from_tensor_slices((features, labels))
            .shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
            .shuffle(1024, seed=seed, reshuffle_each_iteration=False)
            .repeat()
            .batch(batch_size)
        )

    return dataset_fn

"""The input pipeline: labelled points from a CSV file in the data directory."""

import os
from pathlib import Path

import numpy as np
import tensorflow as tf


def data_directory() -> Path:
    """The cluster's read-only data directory (scripts/run --data), else the project's own copy."""
    return Path(os.environ.get("TFCLUSTER_DATA_DIR") or Path(__file__).resolve().parent.parent / "data")


def load_points(directory: Path) -> tuple[np.ndarray, np.ndarray]:
    table = np.loadtxt(directory / "points.csv", delimiter=",", skiprows=1, dtype="float32")
    return table[:, :-1], table[:, -1:]


def make_dataset(features, labels, *, global_batch_size: int, seed: int) -> tf.data.Dataset:
    """Repeated and batched by the global batch; Keras shards it across the workers."""
    return (
        tf.data.Dataset.from_tensor_slices((features, labels))
        .shuffle(len(features), seed=seed, reshuffle_each_iteration=False)
        .repeat()
        .batch(global_batch_size)
    )

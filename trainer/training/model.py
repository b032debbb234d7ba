"""The model and the state mirrored across workers: weights, optimizer slots, the metric."""

import dataclasses

import tensorflow as tf

from trainer.training.data import FEATURES


@dataclasses.dataclass(frozen=True)
class TrainingState:
    model: tf.keras.Model
    optimizer: tf.keras.optimizers.Optimizer
    loss_object: tf.keras.losses.Loss
    accuracy: tf.keras.metrics.Metric


def build_state(strategy: tf.distribute.Strategy, *, learning_rate: float) -> TrainingState:
    # Created inside the scope so every variable is mirrored and kept in sync by all-reduce.
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.layers.Input(shape=(FEATURES,)),
                tf.keras.layers.Dense(16, activation="relu"),
                tf.keras.layers.Dense(1, activation="sigmoid"),
            ]
        )
        optimizer = tf.keras.optimizers.Adam(learning_rate=learning_rate)
        # Per-example losses: the global average is taken over the global batch, not per replica.
        loss_object = tf.keras.losses.BinaryCrossentropy(reduction=tf.keras.losses.Reduction.NONE)
        accuracy = tf.keras.metrics.BinaryAccuracy()
        # Its moments now, not at the first step: a checkpoint can then be read into them at once.
        optimizer.build(model.trainable_variables)
    return TrainingState(model=model, optimizer=optimizer, loss_object=loss_object, accuracy=accuracy)

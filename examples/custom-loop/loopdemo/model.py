"""The model and its optimizer, made inside the strategy's scope."""

import tensorflow as tf


def build(*, learning_rate: float):
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Input(shape=(10,)),
            tf.keras.layers.Dense(16, activation="relu"),
            tf.keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    optimizer = tf.keras.optimizers.Adam(learning_rate=learning_rate)
    return model, optimizer

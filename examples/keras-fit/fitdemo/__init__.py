"""A small Keras `model.fit` project in the shape of TensorFlow's multi-worker Keras tutorial."""

"""A custom training loop with its own checkpointing, in the shape of TensorFlow's tutorials."""

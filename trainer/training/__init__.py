"""The training program: `python -m trainer.training` (TensorFlow, imported after validation)."""

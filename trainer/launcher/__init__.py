"""Each worker's PID 1: `python -m trainer.launcher [-- COMMAND...]` (never imports TensorFlow)."""

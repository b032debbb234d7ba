"""Multi-worker TensorFlow training for a cluster of containers.

Importing this package does not import TensorFlow: configuration is validated first, so a bad
setting fails in milliseconds instead of after a three-second TensorFlow import.
"""

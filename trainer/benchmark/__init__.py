"""Programs the benchmark (scripts/tfcluster/benchmark/) runs on the workers in place of the trainer."""

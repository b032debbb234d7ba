"""Programs the benchmark (scripts/benchmark.py) runs on the workers in place of the trainer."""

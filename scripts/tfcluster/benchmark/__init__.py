"""The benchmark (scripts/benchmark): medians and ratios from one run, written to docs/.

  cases     the timed cases, each run as its user would: the tutorial, scripts/run, Compose, the rest
  measure   `measure(runs)`: every case, alternating, then medians and ratios (docs/benchmark.json)
  report    docs/benchmark.md's tables and docs/benchmark.png's chart, from that result
  network   training under each network profile (--network: docs/network-benchmark.md)
  observer  the observer's cost (--observer: docs/observer-benchmark.md)

The command line is tfcluster.commands.benchmark's. Only the standard library at import time:
matplotlib is imported when the chart is drawn.
"""

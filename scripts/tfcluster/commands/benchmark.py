#!/usr/bin/env python3
"""Benchmark: scripts/run against the tutorial's bare processes, the edit loop, scaling, the image.

The command line of scripts/benchmark: its parser and `main`. What it measures and how it reports
it is tfcluster.benchmark's (cases, measure, report, network, observer). Run from the project root
after scripts/setup (the machine is noisy, so every timed case runs several times, alternating,
and the report gives medians and ratios from this one run):

  PYTHONPATH=scripts:. .venv-bench/bin/python -m tfcluster.commands.benchmark [--runs 5]

It writes docs/benchmark.md (the tables), docs/benchmark.json (for comparing runs) and
docs/benchmark.png (a chart). scripts/benchmark (the shell wrapper) sets up .venv-bench.
"""

import argparse
import json
import sys

# Each of these imports only the standard library at its top (report.chart imports matplotlib
# when it draws), so that --help runs under the host's python3, before .venv-bench exists.
from tfcluster.benchmark import cancelling, measure, network, observer, observer_report, pages, report, warm
from tfcluster.paths import ROOT

DOCS = ROOT / "docs"
EPILOG = """\
writes:
  docs/benchmark.md, docs/benchmark.json, docs/benchmark.png    (every case but the network's)
  docs/network-benchmark.md                                     (with --network)
  docs/observer-benchmark.md, docs/observer-benchmark.json      (with --observer)
  docs/warm-benchmark.md, docs/warm-benchmark.json              (with --warm)
  docs/report-benchmark.md, docs/report-benchmark.json          (with --report)
  docs/cancel-benchmark.md, docs/cancel-benchmark.json          (with --cancel)

examples:
  scripts/benchmark                          # every case, 5 runs each (about 10 minutes)
  scripts/benchmark --runs 9                 # steadier medians, slower
  scripts/benchmark --network --steps 20     # training time under each network profile
  scripts/benchmark --observer --runs 8      # the observer's cost: 8 pairs with it and without
  scripts/benchmark --warm --first-run       # warm, cold and bare, 3 times over; 20 warm runs; a fresh first run
  scripts/benchmark --report                 # the run report's cost: 5 real runs, its step timed after each
  scripts/benchmark --cancel --runs 3        # a cancelled CI step: SIGINT, SIGTERM, SIGHUP, SIGKILL, 3 rounds

exit status:
  0    ok: measured, and the figures written
  1    a measurement failed: the traceback says which
  2    config error: a bad argument, named in one line before anything is set up; or
       scripts/setup could not proceed (Docker missing or not running)
  any other: set-up failed, and said why"""


# The options that measure one thing alone, with what they measure.
ONLY = (
    ("--network", "training time under each network profile, against lan"),
    (
        "--observer",
        "the observer's cost: training programs with it against without, in pairs; its own timer on the examples",
    ),
    ("--report", "the run report's cost: --runs real runs, the report's step timed after each"),
    (
        "--cancel",
        "a cancelled CI step: --runs rounds of scripts/ci-run signalled mid-training (SIGINT, SIGTERM, SIGHUP, "
        "SIGKILL and the next job's removal), each timed to nothing left",
    ),
)
WARM = "warm, cold and bare side by side, then warm runs in a row"


def parser() -> argparse.ArgumentParser:
    # The help is what `scripts/benchmark --help` prints (run by python3, before any set-up), and
    # docs/commands.md shows it (tests/unit/host/commands/: test_help.py, test_commands_page.py).
    result = argparse.ArgumentParser(
        prog="scripts/benchmark",
        description=__doc__.split("\n")[0]
        + "\n\nscripts/benchmark sets up what it needs first (scripts/setup, then .venv-bench with the pinned"
        "\nwheels and matplotlib), then runs python -m tfcluster.commands.benchmark with .venv-bench's"
        "\npython. Not a test: the figures are reported, not asserted. It runs as the Compose project"
        "\ntfc-bench, apart from tfcluster.",
        epilog=EPILOG,
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=100, max_help_position=24),
    )
    result.add_argument("--runs", type=int, default=5, metavar="N", help="runs of each timed case (default: 5)")
    for flag, what in ONLY:
        result.add_argument(flag, action="store_true", help=f"only {what} (default: off)")
    result.add_argument(
        "--steps", type=int, default=50, metavar="N", help="with --network: steps an epoch (default: 50)"
    )
    result.add_argument("--warm", action="store_true", help=f"only {WARM} (default: off)")
    result.add_argument(
        "--comparisons",
        type=int,
        default=3,
        metavar="N",
        help="with --warm: the whole comparison N times over, each of --runs rounds, every one reported (default: 3)",
    )
    result.add_argument(
        "--in-a-row", type=int, default=20, metavar="N", help="with --warm: warm runs in a row (default: 20)"
    )
    result.add_argument(
        "--first-run",
        action="store_true",
        help="with --warm: last, the first run from a fresh machine state; removes every image, the build "
        "cache, the wheelhouse and the Compose plugin first (default: off)",
    )
    return result


def main(argv: list[str]) -> int:
    options = parser()
    arguments = options.parse_args(argv)
    if arguments.runs < 1:
        options.error(f"--runs ({arguments.runs}) must be at least 1")
    for name in ("steps", "comparisons"):
        if getattr(arguments, name) < 1:
            options.error(f"--{name} ({getattr(arguments, name)}) must be at least 1")
    if arguments.warm:
        result = warm.measure(
            arguments.runs, arguments.in_a_row, first_run=arguments.first_run, comparisons=arguments.comparisons
        )
        return _written(
            "warm-benchmark", "Warm workers against cold runs and the bare processes", warm.table(result), result
        )
    if arguments.report:
        result = pages.measure(arguments.runs)
        return _written("report-benchmark", "What the run's report costs a run", pages.table(result), result)
    if arguments.cancel:
        result = cancelling.measure(arguments.runs)
        return _written("cancel-benchmark", "A cancelled CI step, to nothing left", cancelling.table(result), result)
    if arguments.network:
        text = network.network_table(arguments.runs, arguments.steps)
        return _written("network-benchmark", "Training under each network profile", text)
    if arguments.observer:
        observed = observer.measure(arguments.runs)
        return _written("observer-benchmark", "The observer's cost", observer_report.table(observed), observed)
    result = measure.measure(arguments.runs)
    (DOCS / "benchmark.json").write_text(json.dumps(result, indent=2) + "\n")
    text = report.table(result)
    (DOCS / "benchmark.md").write_text("# Benchmark\n\n" + text)
    report.chart(result, DOCS / "benchmark.png")
    print(text)
    return 0


def _written(name: str, title: str, text: str, result: dict | None = None) -> int:
    """The page `name`.md in docs/ (and `name`.json, the figures to compare runs by), and the table printed."""
    if result is not None:
        (DOCS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (DOCS / f"{name}.md").write_text(f"# {title}\n\n" + text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

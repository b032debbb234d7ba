"""scripts/run --slow: one worker (or a few) given fewer CPUs than the others, for a run.

A synchronous cluster runs at its slowest worker's pace; this makes a straggler on purpose, so
that one can see what it costs and that the verdict names it (trainer/verifier/stragglers.py).
The limit is Compose's `cpus:` on that worker's service (a CFS quota: the container may use that
many cores' worth of time), in an override written next to the run's other generated files and
named last in COMPOSE_FILE, so that it wins over compose.yaml's `${TF_WORKER_CPUS:-2}` and over
compose.workers.yaml's extra workers alike. Host only, standard library only.
"""

import argparse
import os
import re
from collections.abc import Mapping

from tfcluster.errors import VALUE_CUTOFF, suggestion

# Written by scripts/run into the run's folder (tfcluster/cluster/runs.py), read by Compose through COMPOSE_FILE.
SLOW_FILE = "compose.slow.yaml"
# Docker refuses a smaller `cpus` ("Range of CPUs is from 0.01 to N").
LEAST_CPUS = 0.01
# A decimal number as written by hand: digits, with a fraction or not. No sign, exponent, `inf`
# or `nan`, which float() would take and Compose would not.
NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")
EXAMPLE = "worker-1=0.25"
WORKER = re.compile(r"worker-[0-9]+")


def assignments(text: str) -> tuple[tuple[str, float], ...]:
    """An argparse type: `NAME=CPUS[,NAME=CPUS...]`, each CPUS a positive decimal number.

    Whether NAME is a worker of this run, and CPUS within the machine's cores, is checked later
    (`check`), once the number of workers is known.
    """
    parsed = []
    for item in text.split(","):
        name, equals, cpus = (part.strip() for part in item.partition("="))
        if not equals or not name:
            raise argparse.ArgumentTypeError(f"{item.strip()!r} must be NAME=CPUS, such as {EXAMPLE}")
        if not NUMBER.fullmatch(cpus) or float(cpus) <= 0:
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r}: CPUS must be a positive number of cores, such as 0.25, got {cpus!r}"
            )
        if float(cpus) < LEAST_CPUS:
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r}: CPUS must be at least {LEAST_CPUS} (Docker's least limit), got {cpus!r}"
            )
        parsed.append((name, float(cpus)))
    return tuple(parsed)


def check(given: list[tuple[tuple[str, float], ...]], names: list[str], cores: int | None = None) -> dict[str, float]:
    """Every --slow of the command line, merged: {worker: CPUs}; raises ValueError, one line."""
    cores = cores or os.cpu_count() or 1
    slowed: dict[str, float] = {}
    for name, cpus in (pair for option in given for pair in option):
        if name not in names:
            # worker-5 of a two-worker run: more workers were meant, not another name.
            hint = "; --workers N sets how many" if WORKER.fullmatch(name) else suggestion(name, names, VALUE_CUTOFF)
            raise ValueError(f"--slow {name}: no such worker in this run ({', '.join(names)}){hint}")
        if name in slowed:
            raise ValueError(f"--slow {name} is given twice ({cpus_text(slowed[name])} and {cpus_text(cpus)})")
        # Docker would refuse it only when the container is created, after the set-up.
        if cpus > cores:
            raise ValueError(f"--slow {name}={cpus_text(cpus)}: more CPUs than this machine has ({cores})")
        slowed[name] = cpus
    return slowed


def cpus_text(cpus: float) -> str:
    """0.25 as 0.25, 1.0 as 1: as the user would write it."""
    return f"{cpus:g}"


def render(slowed: dict[str, float]) -> str:
    """The Compose override: each slowed worker's `cpus:`, nothing else."""
    options = ",".join(f"{name}={cpus_text(cpus)}" for name, cpus in slowed.items())
    lines = [f"# Written by `scripts/run --slow {options}`: each named worker's CPU limit. Do not edit.", "services:"]
    for name, cpus in slowed.items():
        lines += [f"  {name}:", f"    cpus: {cpus_text(cpus)}"]
    return "\n".join(lines) + "\n"


def arguments(slowed: dict[str, float]) -> list[str]:
    """The command line that asks for `slowed`, for the dry run's first line."""
    return ["--slow", ",".join(f"{name}={cpus_text(cpus)}" for name, cpus in slowed.items())] if slowed else []


def given(slow) -> list[tuple[tuple[str, float], ...]]:
    """--slow's values as `check` takes them: the command line's (one tuple an option), or a
    mapping of worker to CPUs (the Python API's), read as the command line would read it."""
    if not isinstance(slow, dict | Mapping):
        return list(slow)
    if not slow:
        return []
    try:
        return [assignments(",".join(f"{name}={cpus}" for name, cpus in slow.items()))]
    except argparse.ArgumentTypeError as error:
        raise ValueError(f"--slow {error}") from None

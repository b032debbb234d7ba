#!/usr/bin/env python3
"""Runs one of the host's commands by name: `python3 scripts/launch.py run ARGUMENT...`.

The bash entry points (scripts/run, scripts/nodes, scripts/benchmark) start their command here,
by path rather than with `python3 -m`: `-m` would put the working directory first on the path,
where a user's own `trainer` or `tfcluster` package would hide the harness's, and a PYTHONPATH
set for it would leak into every process the command starts (set-up, Compose, your env files).
"""

import runpy
import sys
from pathlib import Path

# This file's folder (scripts/, for tfcluster) is first already; the root, for trainer.contract,
# goes right after it, before anything of the user's.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

if __name__ == "__main__":
    command = sys.argv.pop(1)
    runpy.run_module(f"tfcluster.commands.{command}", run_name="__main__", alter_sys=True)

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

ROOT = Path(__file__).resolve().parent.parent
# This file's folder (scripts/, for tfcluster) is first already; the root, for trainer.contract,
# goes right after it, before anything of the user's.
sys.path.insert(1, str(ROOT))
# Under PYTHONDONTWRITEBYTECODE (set on many CI machines, and on this project's own) every command
# would compile the harness's modules from source again: 0.15 s of each `scripts/run`, and of
# every command a test starts. Their bytecode goes to the checkout's own state folder instead,
# never beside a source file (where the variable's users do not want it); nothing is written if
# that folder cannot be, and the processes a command starts are not affected (no variable is set).
if sys.dont_write_bytecode and sys.pycache_prefix is None:
    sys.pycache_prefix = str(ROOT / ".tfcluster" / "pycache")
    sys.dont_write_bytecode = False

if __name__ == "__main__":
    command = sys.argv.pop(1)
    runpy.run_module(f"tfcluster.commands.{command}", run_name="__main__", alter_sys=True)

#!/usr/bin/env python3
"""Writes the checked-in compose.*.yaml files from their fragments: `python3 scripts/compose_files.py [--check]`.

The command is tfcluster.commands.compose_files (scripts/tfcluster/); this file keeps the name the files name.
"""

import sys
from pathlib import Path

sys.path[1:1] = [str(Path(__file__).resolve().parent.parent)]

from tfcluster.commands.compose_files import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

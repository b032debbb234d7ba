#!/usr/bin/env python3
"""Writes docs/commands.md from every host command's --help: `python3 scripts/commands_doc.py [--check]`.

The command is tfcluster.commands.docs (scripts/tfcluster/); this file keeps the name the page names.
"""

import sys
from pathlib import Path

sys.path[1:1] = [str(Path(__file__).resolve().parent.parent)]

from tfcluster.commands.docs import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

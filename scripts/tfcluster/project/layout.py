"""What a worker sees of your project: where it is mounted, the default command, the files read from it.

What a worker sees (docs/bring-your-own.md): the project read-only at /project, its working
directory (mounted, or with --bake copied into an image of its own); your data read-only at /data;
your variables, through the env file scripts/run writes (`.tfcluster/runs/NAME/env`, with TFCLUSTER_USER_ENV
naming them, which the launchers compare at the rendezvous).
"""

from tfcluster.setup import images

# Where a worker finds what you bring (compose.project.yaml, compose.data.yaml).
PROJECT_MOUNT = "/project"
DATA_MOUNT = "/data"
DEFAULT_SCRIPT = "train.py"
DEFAULT_COMMAND = ("python", DEFAULT_SCRIPT)
REQUIREMENTS_FILE = "requirements.txt"
# The tag of an image with your requirements: one per set of requirements, so that two projects
# never overwrite each other's image, and an unchanged file costs a cached build.
IMAGE_REPOSITORY = "tfcluster-project"
# The variable that names your own variables to the launchers, which compare exactly those.
USER_ENVIRONMENT_LIST = "TFCLUSTER_USER_ENV"
# compose.yaml's image when TFCLUSTER_IMAGE is not set: what your project runs on, and a baked one is built on.
DEFAULT_IMAGE = images.TRAINER
# The user every worker runs as (docker/Dockerfile's `USER 1000:1000`): what it may read of a
# mounted folder is what the folder's modes give uid 1000, whoever runs scripts/run.
WORKER_UID = 1000
WORKER_GID = 1000

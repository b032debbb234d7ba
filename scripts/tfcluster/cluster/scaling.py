"""N workers for Compose: compose.workers.yaml, an override whose extra workers `extends:` compose.yaml's worker-1.

Compose has no replica index (docker/compose#9153), so each worker is a service of its own: the
extra ones are compose.yaml's worker-1, field for field, except for their name and index."""

import os

from tfcluster.cluster.compose import BASE_FILE

NETWORK_FILE = "compose.network.yaml"  # Beside BASE_FILE.
TEMPLATE_SHAPER = "shaper-1"

MAX_WORKERS = 16
TEMPLATE_SERVICE = "worker-1"
DEFAULT_WORKERS = 2

SINGLE_WORKER_MIN_ACCURACY = 0.7


def worker_names(count: int) -> list[str]:
    return [f"worker-{index}" for index in range(count)]


# Bring your own trainer: what compose.byo.yaml gives the two default workers, for every worker.
OWN_TRAINER_LINES = (
    "    command: [python, /user/train.py]",
    "    volumes:",
    "      - results:/results",
    "      - ${TRAINER_SCRIPT:?set TRAINER_SCRIPT to the path of your training script}:/user/train.py:ro",
)

# Bring your whole project: what compose.project.yaml (its `x-project` keys) and compose.data.yaml
# (`x-data`) give the two default workers, for every worker. The mounts and the variables are kept
# apart because a service has one `volumes:` and one `environment:`, which both files add to.
# Long syntax for the mounts: a path with a colon in it is still a path, a relative one is taken
# from the project's root as a path (never as a volume's name), and a missing one is an error
# rather than an empty folder made on the host.
PROJECT_LINES = (
    "    command: ${TFCLUSTER_COMMAND:-python train.py}",
    "    working_dir: /project",
    "    env_file:",
    "      - path: ${TFCLUSTER_ENV_FILE:-.tfcluster/env}",
    "        required: false",
)
PROJECT_VOLUME = (
    "      - type: bind",
    "        source: ${TFCLUSTER_PROJECT:?set TFCLUSTER_PROJECT to the folder of your training project}",
    "        target: /project",
    "        read_only: true",
)
PROJECT_ENVIRONMENT = ("      TFCLUSTER_PROJECT_DIR: /project",)
DATA_VOLUME = (
    "      - type: bind",
    "        source: ${TFCLUSTER_DATA:?set TFCLUSTER_DATA to the folder of your data}",
    "        target: /data",
    "        read_only: true",
)
DATA_ENVIRONMENT = ("      TFCLUSTER_DATA_DIR: /data",)
# Your project baked into an image: what compose.baked.yaml gives the two default workers instead
# of the mount. worker-0 alone builds, in compose.yaml; reset, so that Compose never builds
# docker/Dockerfile (no project in it) under the baked image's name.
BAKED_IMAGE = "    image: ${TFCLUSTER_BAKED_IMAGE:?set TFCLUSTER_BAKED_IMAGE to the image scripts/run --bake built}"
BAKED_BUILD = "    build: !reset null"
# A network profile (compose.network.yaml): what it gives the two default workers, for every worker;
# each extra worker's shaper is the file's shaper-1, in that worker's network namespace.
NETWORK_ENVIRONMENT = ("      TF_NETWORK_PROFILE: ${TF_NETWORK_PROFILE:-lan}",)


def shaper_names(count: int) -> list[str]:
    return [f"shaper-{index}" for index in range(count)]


def render(
    count: int,
    *,
    base_file: str = BASE_FILE,
    own_trainer: bool = False,
    project: bool = False,
    baked: bool = False,
    data: bool = False,
    network: bool = False,
) -> str:
    """The override, as YAML text (written by hand: a handful of flat keys needs no YAML library).

    With `own_trainer`, every worker runs the script named by TRAINER_SCRIPT, as compose.byo.yaml
    does for the default two; with `project` (and `data`), your project (and data), as
    compose.project.yaml (and compose.data.yaml) do; with `baked` as well, your project from the
    image TFCLUSTER_BAKED_IMAGE, unmounted, as compose.baked.yaml does. An override cannot extend a
    service of another override, so the extra workers get these lines here, and so do the first
    two, so that this file needs only compose.yaml. With `network`, for a run with
    compose.network.yaml after this file: every extra worker gets its profile, and a shaper that
    extends that file's shaper-1 (`extends` reads a file of its own, whatever the run's files).

    It is longer than the house limit because it is one document written as the literal it renders,
    read top to bottom as the file it becomes; cut into pieces it would no longer read as one.
    """
    check_count(count)
    if own_trainer and project:
        raise ValueError("your own trainer and your own project do not go together")
    if data and not project:
        raise ValueError("data goes with a project of your own")
    if baked and not project:
        raise ValueError("a baked image goes with a project of your own")
    if network and count < 2:
        raise ValueError(f"a network profile shapes the links between workers: it needs 2 or more, got {count}")
    names = worker_names(count)
    hosts = ",".join(names)
    chosen = (
        ("--own-trainer", own_trainer),
        ("--project", project),
        ("--baked", baked),
        ("--data", data),
        ("--network", network),
    )
    options = "".join(f" {option}" for option, wanted in chosen if wanted)
    lines = [
        f"# Generated by `scripts/workers.py {count}{options}`: a {count}-worker cluster over {base_file}. Do not",
        "# edit; change compose.yaml (or the script) and render again.",
        "services:",
    ]
    volumes = (PROJECT_VOLUME if project and not baked else ()) + (DATA_VOLUME if data else ())
    variables = (PROJECT_ENVIRONMENT if project else ()) + (DATA_ENVIRONMENT if data else ())
    for index, name in enumerate(names):
        lines.append(f"  {name}:")
        if index >= DEFAULT_WORKERS:
            lines += [
                f"    extends: {{file: {base_file}, service: {TEMPLATE_SERVICE}}}",
                f"    hostname: {name}",
            ]
        if own_trainer:
            lines += OWN_TRAINER_LINES
        if baked:
            lines += [BAKED_IMAGE, *([BAKED_BUILD] if index == 0 else [])]
        if project:
            lines += PROJECT_LINES
        if volumes:
            lines += ["    volumes:", *volumes]
        lines.append("    environment:")
        lines += variables
        if network and index >= DEFAULT_WORKERS:
            lines += NETWORK_ENVIRONMENT
        lines.append(f"      TF_WORKER_HOSTS: {hosts}")
        if index >= DEFAULT_WORKERS:
            lines.append(f'      TF_TASK_INDEX: "{index}"')
        if count == 1:
            # The tutorial's pass mark (0.75) is for two workers: alone, a worker trains on half as
            # many examples per step and ends at 0.7344 with the default settings.
            lines.append(f"      TRAIN_MIN_ACCURACY: ${{TRAIN_MIN_ACCURACY:-{SINGLE_WORKER_MIN_ACCURACY}}}")
    if count < DEFAULT_WORKERS:
        # A service cannot be deleted by an override; one outside every active profile never starts.
        lines += [f"  {TEMPLATE_SERVICE}:", "    profiles: [not-in-this-cluster]"]
    shapers = shaper_names(count) if network else []
    network_file = os.path.join(os.path.dirname(base_file), NETWORK_FILE)
    for index, shaper in enumerate(shapers[DEFAULT_WORKERS:], start=DEFAULT_WORKERS):
        lines += [
            f"  {shaper}:",
            f"    extends: {{file: {network_file}, service: {TEMPLATE_SHAPER}}}",
            f"    network_mode: service:{names[index]}",
            "    environment:",
            f"      SHAPED_WORKER: {names[index]}",
        ]
    lines += [
        "  verifier:",
        f"    depends_on: !override [{', '.join(names + shapers)}]",
        "    environment:",
        f"      TF_WORKER_HOSTS: {hosts}",
    ]
    return "\n".join(lines) + "\n"


def check_count(count: int) -> None:
    if not 1 <= count <= MAX_WORKERS:
        raise ValueError(f"the number of workers must be 1 to {MAX_WORKERS}, got {count}")

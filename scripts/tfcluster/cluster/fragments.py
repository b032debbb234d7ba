"""Every Compose file of this project, as data: the cluster, and what each mode adds to a worker.

One source for each fact: the default number of workers and their names, the cluster's settings,
and what your own trainer, your project, your data, a baked image, a network shaper or the keeper
add to a worker. The checked-in compose.*.yaml files are written from here
(`python3 scripts/compose_files.py`, and a test holds them equal), and so is the override for any
number of workers (scaling.py), so neither can drift from the other.
"""

import dataclasses

from tfcluster.cluster.compose import BASE_FILE, VERDICT_SERVICE
from tfcluster.cluster.yamltext import (
    Alias,
    Anchored,
    Block,
    Comment,
    Noted,
    Tagged,
    blank,
    document,
)

DEFAULT_WORKERS = 2
MAX_WORKERS = 16
# The worker the extra ones of an N-worker override `extends:` (scaling.py), and the one Swarm and
# Kubernetes run N replicas of (deploy/): every worker but worker-0, which builds the image.
TEMPLATE_SERVICE = "worker-1"


def worker_names(count: int = DEFAULT_WORKERS) -> list[str]:
    return [f"worker-{index}" for index in range(count)]


def shaper_names(count: int = DEFAULT_WORKERS) -> list[str]:
    return [f"shaper-{index}" for index in range(count)]


RESET = Tagged("!reset", None)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)  # One of each: compared by identity.
class Mode:
    """What a mode adds to every worker: service keys, mounts and variables, kept apart because a
    service has one `volumes:` and one `environment:`, which several modes add to."""

    option: str  # scripts/workers.py's and scripts/run's
    file: str  # the override for compose.yaml's default workers
    anchor: str
    header: str
    keys: dict = dataclasses.field(default_factory=dict)
    volumes: tuple = ()
    environment: dict = dataclasses.field(default_factory=dict)
    first: dict = dataclasses.field(default_factory=dict)  # worker-0's alone

    def block(self) -> dict:
        """The keys under the file's anchor, as one service's."""
        return {
            **self.keys,
            **({"volumes": Block(self.volumes)} if self.volumes else {}),
            **({"environment": dict(self.environment)} if self.environment else {}),
        }


# --- compose.yaml -----------------------------------------------------------------------------

BASE_HEADER = """\
The default cluster: two TensorFlow workers on a private network, and a verifier.

  docker compose up                                    # watch it train; the verdict comes last
  docker compose up --exit-code-from verifier verifier # the verdict as the exit status (CI)
  docker compose down --volumes                        # tear down"""
GENERATED = """

Written by `python3 scripts/compose_files.py` from scripts/tfcluster/cluster/fragments.py, as are
the other compose.*.yaml files: edit that and write them again (a test holds them equal)."""


def cluster(names: list[str]) -> dict:
    return {
        "TF_WORKER_HOSTS": ",".join(names),
        "TF_WORKER_PORT": "12345",
        Comment(
            "1: TF_CONFIG in TFJob's form, the first host the `chief` and the rest the `worker` job\n"
            "(scripts/run --chief); 0: every host a `worker`."
        ): None,
        "TF_CHIEF": "${TF_CHIEF:-0}",
        Comment("The launchers' side port, where they meet and then watch each other (trainer/launcher/)."): None,
        "TF_RENDEZVOUS_PORT": "12399",
        Comment(
            "Bounds on every worker (and so on the verifier's wait): all peers must answer within the join\n"
            'deadline, and the whole run must end within the run deadline (docs/settings.md, "Deadlines").'
        ): None,
        "TF_JOIN_TIMEOUT": "${TF_JOIN_TIMEOUT:-60}",
        "TF_RUN_TIMEOUT": "${TF_RUN_TIMEOUT:-3600}",
        Comment(
            "How long a stopped training program has after SIGTERM before SIGKILL (TensorFlow's\n"
            "PreemptionCheckpointHandler saves in it); the workers' stop_grace_period below must exceed it."
        ): None,
        "TF_STOP_GRACE": "${TF_STOP_GRACE:-2}",
        Comment(
            "How long every worker's program may make no progress (no CPU, no output) before the cluster\n"
            "counts as stalled: each worker dumps its program's stack into its log and stops, exit 10."
        ): None,
        "TF_STALL_TIMEOUT": "${TF_STALL_TIMEOUT:-300}",
        "TF_DATA_SHARDING": "${TF_DATA_SHARDING:-sharded}",
    }


HARDENED = {
    "read_only": True,
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges:true"],
}

WORKER = {
    "image": "${TFCLUSTER_IMAGE:-tfcluster:latest}",
    "environment": Anchored(
        "worker-environment",
        {
            "<<": Alias("cluster"),
            "TF_RESULTS_DIR": "/results",
            Comment(
                '1: TensorFlow\'s C++ start-up notices and log lines are shown (docs/settings.md, "Output").'
            ): None,
            "TF_STARTUP_LOGS": "${TF_STARTUP_LOGS:-0}",
            "TRAIN_EPOCHS": "${TRAIN_EPOCHS:-3}",
            "TRAIN_STEPS_PER_EPOCH": "${TRAIN_STEPS_PER_EPOCH:-4}",
            "TRAIN_BATCH_SIZE": "${TRAIN_BATCH_SIZE:-16}",
            "TRAIN_LEARNING_RATE": "${TRAIN_LEARNING_RATE:-0.03}",
            "TRAIN_SEED": "${TRAIN_SEED:-7}",
            Comment(
                "The chief saves the training state here every epoch (or every TRAIN_CHECKPOINT_STEPS steps);\n"
                "a cluster restarted by the keeper (compose.recovery.yaml) resumes from the newest one."
            ): None,
            "TF_CHECKPOINT_DIR": "/checkpoints",
            "TRAIN_CHECKPOINT_STEPS": "${TRAIN_CHECKPOINT_STEPS:-0}",
        },
    ),
    Comment("How the keeper (compose.recovery.yaml) finds the workers, whatever their number."): None,
    "labels": ["tfcluster.role=worker"],
    "networks": ["cluster"],
    Comment(
        "The internal network's DNS never answers for an unknown name, and glibc's default (5 s, twice)\n"
        "would make every lookup of a missing peer take 10 s; give up after one second instead."
    ): None,
    "dns_opt": ["timeout:1", "attempts:1"],
    "volumes": ["results:/results", "checkpoints:/checkpoints"],
    Comment("No `ports:`: TF's gRPC server is unauthenticated and runs what it is sent."): None,
    "read_only": True,
    "tmpfs": ["/tmp"],
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges:true"],
    Comment(
        "A restarted single worker is rejected by its peers as a new incarnation: never restart one\n"
        "alone. The keeper (compose.recovery.yaml) restarts them all together."
    ): None,
    "restart": "no",
    Comment("Docker's SIGKILL must come after the launcher's own (TF_STOP_GRACE): raise both together."): None,
    "stop_grace_period": "${TF_STOP_GRACE_PERIOD:-10s}",
    Comment(
        "Sized from measured use of the default training on 2 cores (the launcher prints each run's\n"
        "figures): peak RSS 543 MiB, 740 MB charged to the container with the page cache, 136 threads.\n"
        "TF's thread pools grow with the cores, hence room for threads; set these for bigger models."
    ): None,
    "mem_limit": "${TF_WORKER_MEMORY:-1536m}",
    "cpus": "${TF_WORKER_CPUS:-2}",
    "pids_limit": 1024,
}

BUILD = {
    "context": ".",
    "dockerfile": "docker/Dockerfile",
    "args": {
        "BASE_IMAGE": "${BASE_IMAGE:-python:3.11-slim-bookworm}",
        "EXTRA_REQUIREMENTS": "${EXTRA_REQUIREMENTS:-}",
        Comment("scripts/setup's digest of the build's inputs, kept as a label (docker/Dockerfile)."): None,
        "TFCLUSTER_INPUTS": "${TFCLUSTER_INPUTS:-}",
        "TFCLUSTER_DEPENDENCIES": "${TFCLUSTER_DEPENDENCIES:-}",
        "TFCLUSTER_REVISION": "${TFCLUSTER_REVISION:-}",
        "TFCLUSTER_REQUIREMENTS": "${TFCLUSTER_REQUIREMENTS:-}",
    },
}


def _tmpfs(why: str, mode: str, size: str) -> dict:
    options = f"uid=1000,gid=1000,mode={mode},size={size}"
    return {"driver_opts": {"type": "tmpfs", "device": "tmpfs", Comment(why): None, "o": options}}


VOLUMES = {
    Comment("A tmpfs: every run starts with an empty results directory, gone when the last container stops."): None,
    "results": _tmpfs(
        "Group-writable for the keeper of compose.recovery.yaml (root, without the capability to\n"
        "write where it may not, in the workers' group).\n"
        "Every worker's log shares it: a worker that finds it full stops, exit 12, naming it.",
        "0770",
        "${TF_RESULTS_SIZE:-64m}",
    ),
    Comment(
        "Also a tmpfs: it lasts while any container of the run uses it (the keeper holds it across\n"
        "restarts), and no later run can resume from an earlier run's checkpoints."
    ): None,
    "checkpoints": _tmpfs(
        "A checkpoint that does not fit fails its save cleanly, exit 12, the previous one intact.",
        "0700",
        "${TF_CHECKPOINTS_SIZE:-256m}",
    ),
}


def _verifier(names: list[str]) -> dict:
    return {
        "image": "${TFCLUSTER_IMAGE:-tfcluster:latest}",
        "entrypoint": ["python", "-m", "trainer.verifier"],
        "command": ["--results", "/results"],
        "environment": Alias("cluster"),
        "depends_on": names,
        Comment("It reads the workers' results from the shared volume and needs no network at all."): None,
        "network_mode": "none",
        "volumes": ["results:/results:ro"],
        Comment(
            "It waits on one lock per worker (a thread each) and parses a few logs: peak RSS 14 MiB measured."
        ): None,
        "mem_limit": "128m",
        "cpus": 0.5,
        "pids_limit": 64,
        **HARDENED,
    }


def _base(names: list[str]) -> dict:
    services = {}
    for index, name in enumerate(names):
        service = {"<<": Alias("worker")}
        if index == 0:
            why = "One service builds the image all of them run (with `build:` on each, Compose builds it twice)."
            service[Comment(why)] = None
            service["build"] = BUILD
        service["hostname"] = name
        service["environment"] = {"<<": Alias("worker-environment"), "TF_TASK_INDEX": str(index)}
        services[name] = service
        services[blank()] = None
    services[VERDICT_SERVICE] = _verifier(names)
    return {
        "name": "tfcluster",
        blank(): None,
        Comment(
            "The cluster, written once. Every worker gets the same list and differs only in TF_TASK_INDEX;\n"
            "the trainer turns the two into TF_CONFIG (trainer/contract/cluster.py)."
        ): None,
        "x-cluster": Anchored("cluster", cluster(names)),
        blank(): None,
        "x-worker": Anchored("worker", WORKER),
        blank(): None,
        "services": services,
        blank(): None,
        "networks": {
            "cluster": {
                "internal": Noted(True, "TF's gRPC server is unauthenticated: no egress, and nothing reaches in.")
            }
        },
        blank(): None,
        "volumes": VOLUMES,
    }


# --- the modes ----------------------------------------------------------------------------------

OWN_TRAINER = Mode(
    option="--own-trainer",
    file="compose.byo.yaml",
    anchor="byo",
    header="""\
Bring your own trainer: your training script on every worker, with nothing in the project edited.

  TRAINER_SCRIPT=./path/to/train.py docker compose -f compose.yaml -f compose.byo.yaml \\
    up --exit-code-from verifier verifier

The path starts with ./ (from the project) or / (Compose reads a bare name as a volume). The
script is mounted read-only at /user/train.py and run by each worker's launcher exactly as
the built-in trainer is: after every worker agrees, with TF_CONFIG set, within the deadlines.
What it gets and what it must print: docs/bring-your-own.md, "The contract".""",
    keys={"command": ["python", "/user/train.py"]},
    volumes=(
        "results:/results",
        "${TRAINER_SCRIPT:?set TRAINER_SCRIPT to the path of your training script}:/user/train.py:ro",
    ),
)

# Long syntax for the mounts: a path with a colon in it is still a path, a relative one is taken
# from the project's root as a path (never as a volume's name), and a missing one is an error
# rather than an empty folder made on the host.
_PROJECT_KEYS = {
    "command": "${TFCLUSTER_COMMAND:-python train.py}",
    "working_dir": "/project",
    "env_file": [{"path": "${TFCLUSTER_ENV_FILE:-.tfcluster/env}", "required": False}],
}
_PROJECT_ENVIRONMENT = {"TFCLUSTER_PROJECT_DIR": "/project"}

PROJECT = Mode(
    option="--project",
    file="compose.project.yaml",
    anchor="project",
    header="""\
Bring your whole training project: its code, settings and data run on every worker, unchanged.

  TFCLUSTER_PROJECT=./path/to/project docker compose -f compose.yaml -f compose.project.yaml \\
    up --exit-code-from verifier verifier
  scripts/run --project path/to/project           # the same, with its checks, requirements and set-up

The project is mounted read-only at /project, the workers' working directory, and each worker's
launcher runs TFCLUSTER_COMMAND there (split as a shell would; default `python train.py`) exactly
as the built-in trainer: after every worker agrees, with TF_CONFIG set, within the deadlines. Your
program's own variables come from the env file (`NAME=VALUE` lines; scripts/run writes
.tfcluster/env, whose TFCLUSTER_USER_ENV line names them for the launchers to compare); Compose's
`environment:` wins over it, so the harness's own settings stay the harness's. Data:
compose.data.yaml. Everything else (read-only root, no capabilities, the results and checkpoints
volumes, which an override's `volumes:` merges with by target) stays as compose.yaml has it.
What a program gets and must print: docs/bring-your-own.md.""",
    keys=_PROJECT_KEYS,
    volumes=(
        {
            "type": "bind",
            "source": "${TFCLUSTER_PROJECT:?set TFCLUSTER_PROJECT to the folder of your training project}",
            "target": "/project",
            "read_only": True,
        },
    ),
    environment=_PROJECT_ENVIRONMENT,
)

DATA = Mode(
    option="--data",
    file="compose.data.yaml",
    anchor="data",
    header="""\
Your data, read-only at /data on every worker, with compose.project.yaml:

  TFCLUSTER_PROJECT=./path/to/project TFCLUSTER_DATA=./path/to/data \\
    docker compose -f compose.yaml -f compose.project.yaml -f compose.data.yaml \\
    up --exit-code-from verifier verifier
  scripts/run --project path/to/project --data path/to/data     # the same, with its set-up

A file of its own because Compose cannot mount a folder only when one is named. The program finds
the folder in TFCLUSTER_DATA_DIR. What a worker writes goes to /tmp or /checkpoints, never here.""",
    volumes=(
        {
            "type": "bind",
            "source": "${TFCLUSTER_DATA:?set TFCLUSTER_DATA to the folder of your data}",
            "target": "/data",
            "read_only": True,
        },
    ),
    environment={"TFCLUSTER_DATA_DIR": "/data"},
)

BAKED = Mode(
    option="--baked",
    file="compose.baked.yaml",
    anchor="baked",
    header="""\
Your training project baked into an image (docker/Dockerfile.project), on both workers, with no
bind mount: for a Docker that cannot see this machine's folders (a CI `container:` job).

  scripts/run --project path/to/project --bake     # builds the image, then runs with this file
  TFCLUSTER_BAKED_IMAGE=tfcluster-baked:0123456789ab docker compose -f compose.yaml \\
    -f compose.baked.yaml up --exit-code-from verifier verifier

As compose.project.yaml, but the project is in the workers' image rather than mounted: the image
is TFCLUSTER_BAKED_IMAGE, built on the project's image (TFCLUSTER_IMAGE, which the verifier
still runs); the command, working directory and env file are the same. worker-0 builds nothing
here (its `build:` is reset): Compose would build docker/Dockerfile, with no project in it, under
the baked image's name. Data stays mounted: compose.data.yaml. What a program gets and must
print: docs/bring-your-own.md.""",
    keys={
        "image": "${TFCLUSTER_BAKED_IMAGE:?set TFCLUSTER_BAKED_IMAGE to the image scripts/run --bake built}",
        **_PROJECT_KEYS,
    },
    environment=_PROJECT_ENVIRONMENT,
    first={"build": RESET},
)

# In the order an N-worker override writes them (scaling.py).
MODES = (OWN_TRAINER, PROJECT, BAKED, DATA)


def _mode_file(mode: Mode, names: list[str]) -> dict:
    services = {}
    for index, name in enumerate(names):
        first = mode.first if index == 0 else {}
        services[name] = {"<<": Alias(mode.anchor), **first} if first else Alias(mode.anchor)
    return {f"x-{mode.anchor}": Anchored(mode.anchor, mode.block()), blank(): None, "services": services}


# --- compose.network.yaml: a shaper beside each worker --------------------------------------------

NETWORK_FILE = "compose.network.yaml"
NETWORK_HEADER = """\
Network profiles: latency, jitter, loss and bandwidth limits between the workers, and partitions
(docs/network.md). Added to compose.yaml:

  TF_NETWORK_PROFILE=wan docker compose -f compose.yaml -f compose.network.yaml up --exit-code-from verifier verifier
  scripts/run --network wan                      # the same, with its set-up
  scripts/partition worker-1                     # cut a worker off mid-training

Each worker gets a shaper: a container in the worker's network namespace with NET_ADMIN, so the
worker itself keeps no privilege. The shaper applies the profile, measures every link, and writes
what it measured to the results volume; the worker's launcher trains only once that is there."""
# The extra workers' shapers (scaling.py) extend this one, in the network file.
TEMPLATE_SHAPER = "shaper-1"
NETWORK_ENVIRONMENT = {"TF_NETWORK_PROFILE": "${TF_NETWORK_PROFILE:-lan}"}

SHAPER = {
    "image": "${TFCLUSTER_SHAPER_IMAGE:-tfcluster-shaper:latest}",
    Comment("The cluster comes from the worker's launcher (its status in the results volume), not from here."): None,
    "environment": Anchored(
        "shaper-environment",
        {
            "TF_RESULTS_DIR": "/results",
            **NETWORK_ENVIRONMENT,
            "TF_NETWORK_RTT_MS": "${TF_NETWORK_RTT_MS:-}",
            "TF_NETWORK_JITTER_MS": "${TF_NETWORK_JITTER_MS:-}",
            "TF_NETWORK_LOSS": "${TF_NETWORK_LOSS:-}",
            "TF_NETWORK_RATE_MBIT": "${TF_NETWORK_RATE_MBIT:-}",
            Comment(
                "Cuts timed by training progress (scripts/run --fault; trainer/contract/faults.py): each\n"
                "shaper applies its own worker's, and records them for the verifier."
            ): None,
            "TF_NETWORK_FAULTS": "${TF_NETWORK_FAULTS:-}",
            Comment(
                "Links that differ from the profile (scripts/run --link; trainer/contract/links.py): each\n"
                "shaper shapes its worker's link with each peer by the profile of each direction."
            ): None,
            "TF_NETWORK_LINKS": "${TF_NETWORK_LINKS:-}",
        },
    ),
    Comment(
        "root only for tc and iptables (with NET_ADMIN and nothing else); the workers' group, to write\n"
        "its measurements beside their results."
    ): None,
    "user": "0:1000",
    "cap_drop": ["ALL"],
    "cap_add": ["NET_ADMIN"],
    "security_opt": ["no-new-privileges:true"],
    "read_only": True,
    "tmpfs": Noted(["/run"], "iptables' lock file"),
    "volumes": ["results:/results"],
    "mem_limit": "128m",
    "cpus": 0.5,
    "pids_limit": 64,
    Comment(
        "How the keeper (compose.recovery.yaml) finds the shapers, to start them again after their\n"
        "workers: a restarted worker has a new network namespace, which its shaper must join and shape."
    ): None,
    "labels": ["tfcluster.role=shaper"],
    "restart": "no",
}

SHAPER_BUILD = {
    "context": ".",
    "dockerfile": "docker/Dockerfile.shaper",
    "args": {
        "SHAPER_BASE_IMAGE": "${SHAPER_BASE_IMAGE:-debian:bookworm-slim}",
        "TFCLUSTER_INPUTS": "${TFCLUSTER_SHAPER_INPUTS:-}",
    },
}


def shaper(worker: str) -> dict:
    """A worker's shaper, in its network namespace, as the network file's template has it."""
    return {"network_mode": f"service:{worker}", "environment": {"SHAPED_WORKER": worker}}


def _network(names: list[str]) -> dict:
    services = {}
    for index, name in enumerate(names):
        comment = "The launcher waits for its shaper's measurements (and stops if they miss the profile)."
        services[name] = {"environment": {**({Comment(comment): None} if index == 0 else {}), **NETWORK_ENVIRONMENT}}
    services[blank()] = None
    shapers = shaper_names(len(names))
    for index, (name, shaper_name) in enumerate(zip(names, shapers, strict=True)):
        own = shaper(name)
        services[shaper_name] = {
            "<<": Alias("shaper"),
            **({"build": SHAPER_BUILD} if index == 0 else {}),
            "network_mode": own["network_mode"],
            "environment": {"<<": Alias("shaper-environment"), **own["environment"]},
        }
    services[blank()] = None
    services[VERDICT_SERVICE] = {
        "depends_on": names + shapers,
        "environment": {
            Comment(
                "The faults asked for: each must be in a shaper's record, injected or never reached, or\n"
                "the verdict fails (the run did not test it)."
            ): None,
            "TF_NETWORK_FAULTS": "${TF_NETWORK_FAULTS:-}",
        },
    }
    return {"x-shaper": Anchored("shaper", SHAPER), blank(): None, "services": services}


# --- compose.recovery.yaml: the keeper ------------------------------------------------------------

RECOVERY_FILE = "compose.recovery.yaml"
RECOVERY_HEADER = """\
Recovery: a keeper that restarts the whole cluster when a worker fails, and a verifier that
waits for it and reports the restarts (docs/recovery.md). Added to compose.yaml:

  docker compose -f compose.yaml -f compose.recovery.yaml up --exit-code-from verifier verifier
  scripts/run --recover                                # the same, with its set-up

The keeper talks to the Docker Engine through its socket, which is root on this machine: that
is why it is here, opt-in, and not in compose.yaml. It has no network, no capabilities and a
read-only root. scripts/run runs it as the workers' user (1000) with the socket's group added
(TFCLUSTER_KEEPER_USER, DOCKER_SOCKET_GID), the least that opens the socket; by hand, without
them, it runs as uid 0 (still without a capability) in the workers' group, to write its record
beside theirs. The socket is the whole Docker API all the same: no registry here to pull a
socket proxy from, which could narrow it to containers (docs/security.md)."""
KEEPER = "keeper"


def _recovery(names: list[str]) -> dict:
    keeper = {
        "image": "${TFCLUSTER_IMAGE:-tfcluster:latest}",
        "entrypoint": ["python", "-m", "trainer.keeper"],
        "command": [],
        "environment": {
            "TF_RESULTS_DIR": "/results",
            "TF_RESTART_LIMIT": "${TF_RESTART_LIMIT:-3}",
            Comment("Its wait for the workers is bounded as the verifier's (trainer/keeper/keeper.py)."): None,
            "TF_JOIN_TIMEOUT": "${TF_JOIN_TIMEOUT:-60}",
            "TF_RUN_TIMEOUT": "${TF_RUN_TIMEOUT:-3600}",
        },
        Comment("After the workers, so that it finds them; it looks at their states first, then follows events."): None,
        "depends_on": names,
        "user": "${TFCLUSTER_KEEPER_USER:-0:1000}",
        "group_add": ["${DOCKER_SOCKET_GID:-1000}"],
        "network_mode": "none",
        "volumes": Block(
            [
                "${DOCKER_SOCKET:-/var/run/docker.sock}:/var/run/docker.sock",
                "results:/results",
                Comment(
                    "Not read: held, so that the checkpoints' tmpfs outlives the moment when every worker is\n"
                    "down between a failure and the restart."
                ),
                "checkpoints:/checkpoints:ro",
            ]
        ),
        Comment("It follows events and inspects containers: measured at 30 MiB."): None,
        "mem_limit": "128m",
        "cpus": 0.5,
        "pids_limit": 64,
        **HARDENED,
        "restart": "no",
    }
    return {
        "services": {
            KEEPER: keeper,
            blank(): None,
            VERDICT_SERVICE: {
                "command": ["--results", "/results", "--keeper", KEEPER],
                "environment": {"TF_RESTART_LIMIT": "${TF_RESTART_LIMIT:-3}"},
                "depends_on": [*names, KEEPER],
            },
        }
    }


def files(names: list[str] | None = None) -> dict[str, str]:
    """Every checked-in Compose file's text, by its name, for the default workers."""
    names = names or worker_names()
    texts = {BASE_FILE: document(_base(names), BASE_HEADER + GENERATED)}
    for mode in MODES:
        texts[mode.file] = document(_mode_file(mode, names), mode.header + GENERATED)
    texts[NETWORK_FILE] = document(_network(names), NETWORK_HEADER + GENERATED)
    texts[RECOVERY_FILE] = document(_recovery(names), RECOVERY_HEADER + GENERATED)
    return texts

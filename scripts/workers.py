#!/usr/bin/env python3
"""Renders N workers of compose.yaml's cluster for Compose, Docker Swarm or Kubernetes.

  scripts/workers.py 4 > compose.workers.yaml                      # a Compose override
  docker compose -f compose.yaml -f compose.workers.yaml up --exit-code-from verifier verifier
  scripts/workers.py 4 --target swarm > stack.yaml                 # a stack: one service, 4 replicas
  scripts/workers.py 4 --target kubernetes > tfcluster.yaml        # headless Service + Indexed Job
  scripts/workers.py 4 --target kubernetes --image registry.example.com/my-model:1   # a baked project

Compose has no replica index (docker/compose#9153), so there each worker is a service of its own:
the extra ones `extends:` worker-1 of compose.yaml, so they are that worker, field for field,
except for their name and index. Swarm and Kubernetes run N replicas of one definition, which is
compose.yaml's worker-1 as `docker compose config` resolves it (image, settings, hardening), with
the index taken from Swarm's task slot or the Indexed Job's completion index (trainer/contract/cluster.py).
Nothing is written twice, so none of the three can drift from compose.yaml. Neither Swarm's nodes
nor Kubernetes' pods have this machine's folders, so a project of your own goes to them baked into
an image (`scripts/run --project DIR --bake`), named by --image, with --command to run in it.
"""

import json
import subprocess
import sys
from pathlib import Path

import training_project  # scripts/training_project.py: Python puts this file's folder on the path.
from commandline import Parser, one_of  # scripts/commandline.py, the same way.
from training_project import Refusal

ROOT = Path(__file__).resolve().parent.parent

MAX_WORKERS = 16
BASE_FILE = "compose.yaml"
TEMPLATE_SERVICE = "worker-1"
DEFAULT_WORKERS = 2
TARGETS = ("compose", "swarm", "kubernetes")
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


def render(
    count: int,
    *,
    base_file: str = BASE_FILE,
    own_trainer: bool = False,
    project: bool = False,
    baked: bool = False,
    data: bool = False,
) -> str:
    """The override, as YAML text (written by hand: a handful of flat keys needs no YAML library).

    With `own_trainer`, every worker runs the script named by TRAINER_SCRIPT, as compose.byo.yaml
    does for the default two; with `project` (and `data`), your project (and data), as
    compose.project.yaml (and compose.data.yaml) do; with `baked` as well, your project from the
    image TFCLUSTER_BAKED_IMAGE, unmounted, as compose.baked.yaml does. An override cannot extend a
    service of another override, so the extra workers get these lines here, and so do the first
    two, so that this file needs only compose.yaml.
    """
    check_count(count)
    if own_trainer and project:
        raise ValueError("your own trainer and your own project do not go together")
    if data and not project:
        raise ValueError("data goes with a project of your own")
    if baked and not project:
        raise ValueError("a baked image goes with a project of your own")
    names = worker_names(count)
    hosts = ",".join(names)
    chosen = (("--own-trainer", own_trainer), ("--project", project), ("--baked", baked), ("--data", data))
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
    lines += [
        "  verifier:",
        f"    depends_on: !override [{', '.join(names)}]",
        "    environment:",
        f"      TF_WORKER_HOSTS: {hosts}",
    ]
    return "\n".join(lines) + "\n"


def check_count(count: int) -> None:
    if not 1 <= count <= MAX_WORKERS:
        raise ValueError(f"the number of workers must be 1 to {MAX_WORKERS}, got {count}")


def compose_model(*, interpolate: bool) -> dict:
    """compose.yaml as Compose itself resolves it (anchors, merges and, if asked, variables)."""
    command = ["docker", "compose", "-f", str(ROOT / BASE_FILE), "config", "--format", "json"]
    if not interpolate:
        command.append("--no-interpolate")
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


# -- Docker Swarm -------------------------------------------------------------------------------

SWARM_SERVICE = "worker"


def swarm_hosts(count: int) -> str:
    # `{{.Task.Slot}}` counts from 1, so the hostnames do too; the index is the slot less one.
    return ",".join(f"{SWARM_SERVICE}-{slot}" for slot in range(1, count + 1))


def render_swarm(
    count: int, model: dict, *, image: str | None = None, command: list[str] | None = None, one_per_node: bool = False
) -> str:
    """A stack file (JSON, which `docker stack deploy` reads as YAML): N replicas of worker-1.

    With `image` (a project baked into an image), the workers and the verifier run it, so that one
    image is all the nodes need; with `command`, the workers run that instead of the image's own.
    With `one_per_node`, Swarm places at most one worker on a node, and there is no verifier
    service: its results volume would be each node's own, so the workers' logs are judged instead
    (scripts/nodes does, docs/nodes.md).
    """
    check_count(count)
    worker, verifier = model["services"][TEMPLATE_SERVICE], model["services"]["verifier"]
    environment = {key: value for key, value in worker["environment"].items() if key != "TF_TASK_INDEX"}
    environment |= {"TF_WORKER_HOSTS": swarm_hosts(count), "TF_TASK_SLOT": "{{.Task.Slot}}"}
    once = {"restart_policy": {"condition": "none"}}  # A restarted worker cannot rejoin (docs/recovery.md).
    # `docker stack deploy` interpolates variables in every value: a dollar of yours stays one.
    run = {"command": [word.replace("$", "$$") for word in command]} if command else {}
    # The verifier runs where its own image would have it: in a baked image the working directory
    # is /project, whose own `trainer` package, if it had one, `python -m` would import first.
    verifier_directory = {"working_dir": "/app"} if image else {}
    stack = {
        "services": {
            SWARM_SERVICE: {
                "image": image or worker["image"],
                **run,
                "hostname": f"{SWARM_SERVICE}-{{{{.Task.Slot}}}}",
                "environment": environment,
                "networks": ["cluster"],
                "read_only": worker["read_only"],
                "cap_drop": worker["cap_drop"],
                # Swarm has no `tmpfs:` key for services; a tmpfs mount does the same.
                "volumes": [*worker["volumes"], {"type": "tmpfs", "target": "/tmp"}],
                "deploy": {
                    "replicas": count,
                    # The workers find each other by their names' addresses: a virtual IP in
                    # front of each (Swarm's default) resolved, but did not connect across nodes.
                    "endpoint_mode": "dnsrr",
                    **({"placement": {"max_replicas_per_node": 1}} if one_per_node else {}),
                    **once,
                    "resources": {
                        "limits": {
                            "memory": worker["mem_limit"],
                            "cpus": str(worker["cpus"]),
                            "pids": worker["pids_limit"],
                        }
                    },
                },
            },
        },
        # Attachable: a container of your own can join it on any node, to look around.
        "networks": {"cluster": {"driver": "overlay", "internal": True, "attachable": True}},
        "volumes": {name: {"driver_opts": volume["driver_opts"]} for name, volume in model["volumes"].items()},
    }
    if not one_per_node:
        stack["services"]["verifier"] = {
            "image": image or verifier["image"],
            **verifier_directory,
            "entrypoint": verifier["entrypoint"],
            "command": verifier["command"],
            "environment": {**verifier["environment"], "TF_WORKER_HOSTS": swarm_hosts(count)},
            "read_only": verifier["read_only"],
            "cap_drop": verifier["cap_drop"],
            "volumes": verifier["volumes"],
            # Swarm has no `network_mode: none`; the internal network is the closest.
            "networks": ["cluster"],
            "deploy": {"replicas": 1, **once},
        }
    return json.dumps(stack, indent=2) + "\n"


# -- Kubernetes ---------------------------------------------------------------------------------

JOB = "tfcluster"
LABELS = {"app.kubernetes.io/name": JOB}


def manifest(api_version: str, kind: str, spec: dict) -> dict:
    """One of the cluster's objects: all share the Job's name and labels."""
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": JOB, "labels": LABELS}, "spec": spec}


def kubernetes_hosts(count: int) -> str:
    # An Indexed Job's pod N is `<job>-N`; with `subdomain` naming the headless Service it is
    # reachable as `<job>-N.<service>` from the other pods of the namespace.
    return ",".join(f"{JOB}-{index}.{JOB}" for index in range(count))


def render_kubernetes(count: int, model: dict, *, image: str | None = None, command: list[str] | None = None) -> str:
    """A headless Service, an Indexed Job of N pods and a NetworkPolicy sealing their ports.

    With `image` (a project baked into an image), the pods run it; with `command`, the pods run
    that instead of the image's own (as `args`: the launcher stays the entrypoint).
    """
    check_count(count)
    worker = model["services"][TEMPLATE_SERVICE]
    # No results volume for a verifier, and no checkpoints: resuming needs a volume every pod shares
    # (ReadWriteMany), which is the cluster's to provide (docs/kubernetes.md).
    unused = ("TF_TASK_INDEX", "TF_RESULTS_DIR", "TF_CHECKPOINT_DIR")
    environment = {key: value for key, value in worker["environment"].items() if key not in unused}
    environment["TF_WORKER_HOSTS"] = kubernetes_hosts(count)
    # The launcher's side port, which peers must reach as well as TF's own (both in compose.yaml).
    ports = [int(environment["TF_WORKER_PORT"]), int(environment["TF_RENDEZVOUS_PORT"])]
    service = manifest(
        "v1",
        "Service",
        {
            "clusterIP": "None",
            # Peers must resolve before they are ready: the workers meet before any of them is.
            "publishNotReadyAddresses": True,
            "selector": LABELS,
            "ports": [{"name": name, "port": port} for name, port in zip(("grpc", "rendezvous"), ports, strict=True)],
        },
    )
    container = {
        "name": "worker",
        "image": image or worker["image"],
        # Kubernetes expands $(NAME) in args; $$( keeps a command's own as it is.
        **({"args": [word.replace("$(", "$$(") for word in command]} if command else {}),
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": key, "value": str(value)} for key, value in sorted(environment.items())],
        "ports": [{"containerPort": port} for port in ports],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        # compose.yaml's limits (Kubernetes has no per-container PID limit; it is the kubelet's).
        # The requests are what the default training was measured to use, so pods schedule on
        # smaller nodes: peak RSS 543 MiB, about one core.
        "resources": {
            "limits": {"memory": f"{int(worker['mem_limit']) // 2**20}Mi", "cpu": str(worker["cpus"])},
            "requests": {"memory": "768Mi", "cpu": "1"},
        },
    }
    job = manifest(
        "batch/v1",
        "Job",
        {
            "completionMode": "Indexed",
            "completions": count,
            "parallelism": count,
            # A restarted worker cannot rejoin its peers: a failure fails the Job.
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": LABELS},
                "spec": {
                    "subdomain": JOB,
                    "restartPolicy": "Never",
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"medium": "Memory"}}],
                },
            },
        },
    )
    # TensorFlow's gRPC server is unauthenticated: only the Job's own pods may reach it.
    policy = manifest(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        {
            "podSelector": {"matchLabels": LABELS},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": LABELS}}]}],
        },
    )
    return "".join("---\n" + json.dumps(document, indent=2) + "\n" for document in (service, job, policy))


EPILOG = f"""\
examples:
  scripts/workers.py 4 --output compose.workers.yaml                 # a Compose override
  docker compose -f compose.yaml -f compose.workers.yaml up --exit-code-from verifier verifier
  scripts/workers.py 3 --target swarm > stack.yaml                   # a stack: one service, 3 replicas
  scripts/workers.py 3 --target swarm --one-per-node > stack.yaml    # one worker per node, no verifier
  scripts/workers.py 4 --target kubernetes > tfcluster.yaml          # headless Service + Indexed Job
  scripts/workers.py 3 --project --data -o compose.workers.yaml      # your project and data on each
  scripts/workers.py 3 --target swarm --image tfcluster-baked:0123456789ab \\
    --command "python -m model.train" > stack.yaml     # a project baked by scripts/run --bake

Compose's workers are worker-0 to worker-N-1; Swarm's are worker-1 to worker-N (its task slots),
Kubernetes' tfcluster-0 to tfcluster-N-1 (the Job's completion index); every index counts from 0.
scripts/run --workers N renders the Compose override itself. The swarm and kubernetes targets read
compose.yaml through `docker compose config`, so they need Docker; compose does not. They mount no
folder of this machine: a project of your own goes to them baked into an image (scripts/run
--project DIR --bake, docs/bring-your-own.md), pushed where the nodes pull from.

exit status:
  0    ok: written
  1    `docker compose config` failed (swarm and kubernetes only): the traceback says why
  2    config error: a bad argument, named in one line (N outside 1 to {MAX_WORKERS}, for one)"""


def parser() -> Parser:
    parser = Parser(
        "workers.py",
        prog="scripts/workers.py",
        description=__doc__.split("\n")[0],
        epilog=EPILOG,
        value_names={
            "--target": "a target",
            "--output": "a file name",
            "--image": "an image",
            "--command": "a command",
        },
    )
    # Checked in main() rather than by argparse, whose message for a positional would name it by
    # its metavar rather than say what it is.
    parser.add_argument("workers", metavar="N", help=f"how many workers, 1 to {MAX_WORKERS}")
    parser.add_argument(
        "--target",
        type=one_of(*TARGETS),
        default="compose",
        metavar="{" + ",".join(TARGETS) + "}",
        help="what to render for (default: compose, an override of compose.yaml)",
    )
    parser.add_argument(
        "--own-trainer",
        action="store_true",
        help="compose only: every worker runs the script named by TRAINER_SCRIPT, as compose.byo.yaml (default: off)",
    )
    parser.add_argument(
        "--project",
        action="store_true",
        help="compose only: every worker runs your project, named by TFCLUSTER_PROJECT, with "
        "TFCLUSTER_COMMAND, as compose.project.yaml (default: off)",
    )
    parser.add_argument(
        "--baked",
        action="store_true",
        help="compose only, with --project: your project is in the image named by TFCLUSTER_BAKED_IMAGE "
        "(scripts/run --bake), not mounted, as compose.baked.yaml (default: off)",
    )
    parser.add_argument(
        "--data",
        action="store_true",
        help="compose only, with --project: every worker gets your data, named by TFCLUSTER_DATA, "
        "as compose.data.yaml (default: off)",
    )
    parser.add_argument(
        "--image",
        metavar="NAME",
        help="swarm and kubernetes only: the image every worker runs (the verifier too), such as your "
        "project baked by scripts/run --bake (default: compose.yaml's, tfcluster:latest)",
    )
    parser.add_argument(
        "--command",
        metavar="CMD",
        help="swarm and kubernetes only: what every worker's launcher runs, split as a shell would "
        "(default: the image's own: python train.py in /project for a baked project)",
    )
    parser.add_argument(
        "--one-per-node",
        action="store_true",
        help="swarm only: at most one worker on a node, and no verifier service, whose results volume "
        "would be each node's own: judge the workers' logs, as scripts/nodes run does (default: off)",
    )
    parser.add_argument("--output", "-o", metavar="FILE", help="write to this file (default: standard output)")
    return parser


def main(argv: list[str]) -> int:
    arguments = parser().parse_args(argv)
    try:
        count = int(arguments.workers)
        check_count(count)
    except ValueError:
        print(
            f"workers.py: the number of workers must be a whole number from 1 to {MAX_WORKERS}, "
            f"got {arguments.workers!r}",
            file=sys.stderr,
        )
        return 2
    chosen = [option for option in ("own_trainer", "project", "baked", "data") if getattr(arguments, option)]
    if chosen and arguments.target != "compose":
        print(f"workers.py: --{chosen[0].replace('_', '-')} is for the Compose target only", file=sys.stderr)
        return 2
    given = [option for option in ("image", "command") if getattr(arguments, option) is not None]
    if given and arguments.target == "compose":
        print(
            f"workers.py: --{given[0]} is for the swarm and kubernetes targets (Compose: --project --baked)",
            file=sys.stderr,
        )
        return 2
    if arguments.one_per_node and arguments.target != "swarm":
        print("workers.py: --one-per-node is for the swarm target only", file=sys.stderr)
        return 2
    if arguments.own_trainer and arguments.project:
        print("workers.py: --own-trainer and --project do not go together", file=sys.stderr)
        return 2
    if arguments.data and not arguments.project:
        print("workers.py: --data goes with --project (your data, for your project)", file=sys.stderr)
        return 2
    if arguments.baked and not arguments.project:
        print("workers.py: --baked goes with --project (your project, baked into an image)", file=sys.stderr)
        return 2
    try:
        command = None if arguments.command is None else training_project.split_command(arguments.command)
        if arguments.image is not None:
            training_project.check_image(arguments.image, option="--image", digest=True)
    except Refusal as refusal:
        print(f"workers.py: {refusal}", file=sys.stderr)
        return 2
    if arguments.target == "compose":
        text = render(
            count,
            own_trainer=arguments.own_trainer,
            project=arguments.project,
            baked=arguments.baked,
            data=arguments.data,
        )
    elif arguments.target == "swarm":
        # Uninterpolated: `docker stack deploy` fills in ${TRAIN_EPOCHS:-3} and the rest itself.
        text = render_swarm(
            count,
            compose_model(interpolate=False),
            image=arguments.image,
            command=command,
            one_per_node=arguments.one_per_node,
        )
    else:
        text = render_kubernetes(count, compose_model(interpolate=True), image=arguments.image, command=command)
    if arguments.output:
        with open(arguments.output, "w", encoding="utf-8") as output:
            output.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

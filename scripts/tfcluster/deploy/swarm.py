"""The cluster as a Docker Swarm stack: N replicas of compose.yaml's worker-1, indexed by task slot."""

import json

from tfcluster.cluster.compose import VERDICT_SERVICE
from tfcluster.cluster.scaling import TEMPLATE_SERVICE, check_count

# -- Docker Swarm -------------------------------------------------------------------------------

SWARM_SERVICE = "worker"


def swarm_hosts(count: int) -> str:
    # `{{.Task.Slot}}` counts from 1, so the hostnames do too; the index is the slot less one.
    return ",".join(f"{SWARM_SERVICE}-{slot}" for slot in range(1, count + 1))


def render(
    count: int, model: dict, *, image: str | None = None, command: list[str] | None = None, one_per_node: bool = False
) -> str:
    """A stack file (JSON, which `docker stack deploy` reads as YAML): N replicas of worker-1.

    With `image` (a project baked into an image), the workers and the verifier run it, so that one
    image is all the nodes need; with `command`, the workers run that instead of the image's own.
    With `one_per_node`, Swarm places at most one worker on a node, and there is no verifier
    service: its results volume would be each node's own, so the workers' logs are judged instead
    (scripts/nodes does, docs/nodes.md).

    It is longer than the house limit because it is one document written as the literal it renders,
    read top to bottom as the file it becomes; cut into pieces it would no longer read as one.
    """
    check_count(count)
    worker, verifier = model["services"][TEMPLATE_SERVICE], model["services"][VERDICT_SERVICE]
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
        stack["services"][VERDICT_SERVICE] = {
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

"""The cluster for Kubernetes: a headless Service, an Indexed Job of N pods and a NetworkPolicy."""

import json

from tfcluster.cluster.scaling import TEMPLATE_SERVICE, check_count

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


def render(count: int, model: dict, *, image: str | None = None, command: list[str] | None = None) -> str:
    """A headless Service, an Indexed Job of N pods and a NetworkPolicy sealing their ports.

    With `image` (a project baked into an image), the pods run it; with `command`, the pods run
    that instead of the image's own (as `args`: the launcher stays the entrypoint).

    It is longer than the house limit because it is one document written as the literal it renders,
    read top to bottom as the file it becomes; cut into pieces it would no longer read as one.
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

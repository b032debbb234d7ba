"""The cluster template: the worker list written once, turned into each worker's TF_CONFIG.

Compose, Swarm and Kubernetes differ only in where the host list and the task index come from;
this module is the one place that turns (hosts, index) into TF_CONFIG and validates either form.

A TF_CONFIG may also name its first task `chief`, as TFJob, AI Platform and Vertex write it
(`{"cluster": {"chief": [A], "worker": [B, C]}, "task": {"type": "chief", "index": 0}}`):
MultiWorkerMirroredStrategy takes the chief as worker 0 with the leader's duties, so here it is
task 0 of one ordered list, and its TF_CONFIG is given back in the form it came in. `evaluator`
and `ps` tasks are refused: the one is no part of the synchronous cluster, the other another
strategy's.
"""

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence

DEFAULT_PORT = 12345

# A DNS name (RFC 1123 labels) or an IPv4 address; TF's gRPC layer needs no more than that.
_HOST_PATTERN = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The workers of one cluster, as `host:port` addresses, and which of them this process is."""

    workers: tuple[str, ...]
    index: int
    # Whether task 0 is a `chief` (TFJob's form), not `worker` 0.
    chief: bool = False

    def __post_init__(self):
        if not self.workers:
            raise ValueError("the cluster has no workers: give at least one `host:port`")
        for address in self.workers:
            _check_address(address)
        seen = set()
        for address in self.workers:
            if address in seen:
                raise ValueError(f"worker `{address}` appears twice in the cluster")
            seen.add(address)
        if isinstance(self.index, bool) or not isinstance(self.index, int):
            raise ValueError(f"the task index ({self.index!r}) must be an integer")
        if not 0 <= self.index < len(self.workers):
            raise ValueError(f"the task index ({self.index}) must be in [0, {len(self.workers)})")

    @property
    def size(self) -> int:
        return len(self.workers)

    @property
    def address(self) -> str:
        return self.workers[self.index]

    @property
    def host(self) -> str:
        return host_of(self.address)

    @property
    def task(self) -> tuple[str, int]:
        """This process's task as TF_CONFIG names it: (type, index within the type)."""
        if self.chief:
            return ("chief", 0) if self.index == 0 else ("worker", self.index - 1)
        return "worker", self.index

    def tf_config(self) -> dict:
        if self.chief:  # As it came: no `worker` job when there is none (TensorFlow takes no empty job).
            jobs = {"chief": [self.workers[0]], **({"worker": list(self.workers[1:])} if self.size > 1 else {})}
        else:
            jobs = {"worker": list(self.workers)}
        kind, index = self.task
        return {"cluster": jobs, "task": {"type": kind, "index": index}}

    def tf_config_json(self) -> str:
        return json.dumps(self.tf_config(), separators=(",", ":"))


def export_for_tensorflow(cluster: Cluster, environ) -> None:
    """Prepares a process's environment for TensorFlow, which reads TF_CONFIG when the strategy is
    built: the cluster in TF_CONFIG form, CPU only, and TF's C++ start-up chatter kept out of logs."""
    environ["TF_CONFIG"] = cluster.tf_config_json()
    environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
    environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def host_of(address: str) -> str:
    return address.rsplit(":", 1)[0]


def _check_address(address) -> None:
    if not isinstance(address, str):
        raise ValueError(f"worker address {address!r} must be a `host:port` string")
    host, separator, port = address.rpartition(":")
    if not separator or not _HOST_PATTERN.match(host):
        raise ValueError(f"worker address `{address}` is not a valid `host:port`")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"worker address `{address}` has port `{port}`, which is not in [1, 65535]")


def parse_index(text: str, *, name: str = "TF_TASK_INDEX") -> int:
    stripped = text.strip()
    if not re.fullmatch(r"[0-9]+", stripped):
        raise ValueError(f"`{name}` ({text!r}) must be a non-negative integer")
    return int(stripped)


def from_template(
    hosts: str,
    index: int,
    *,
    default_port: int = DEFAULT_PORT,
    index_name: str = "TF_TASK_INDEX",
    chief: bool = False,
) -> Cluster:
    """Builds the cluster from the shared template: a comma-separated host list, one port.

    An entry may carry its own port (`worker-0:2222`); the others get `default_port`.
    `index_name` is where the index came from, so an error names what the user must fix.
    """
    entries = [entry.strip() for entry in hosts.split(",")]
    if not any(entries):
        raise ValueError(f"the worker host list ({hosts!r}) is empty")
    if "" in entries:
        raise ValueError(f"the worker host list ({hosts!r}) has an empty entry")
    workers = tuple(entry if ":" in entry else f"{entry}:{default_port}" for entry in entries)
    if not 0 <= index < len(workers):
        raise ValueError(
            f"`{index_name}` ({index}) must be in [0, {len(workers)}) for the {len(workers)} worker(s) {hosts!r}"
        )
    return Cluster(workers=workers, index=index, chief=chief)


def from_tf_config(text: str) -> Cluster:
    """Parses and validates a complete TF_CONFIG given by the user."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error.msg} at character {error.pos}): {text!r}") from None
    if not isinstance(config, Mapping):
        raise ValueError(f"TF_CONFIG must be a JSON object, not {text!r}")
    cluster = config.get("cluster")
    if not isinstance(cluster, Mapping):
        raise ValueError(f"TF_CONFIG has no `cluster` object: {text!r}")
    unsupported = sorted(set(cluster) - {"chief", "worker"})
    if unsupported:
        raise ValueError(
            f"TF_CONFIG cluster has job(s) {unsupported}: MultiWorkerMirroredStrategy trains with `chief` and "
            "`worker` tasks alone (an `evaluator` runs apart from the synchronous cluster, `ps` is "
            "ParameterServerStrategy's)"
        )
    chief = _job(cluster, "chief") if "chief" in cluster else []
    if len(chief) > 1:
        raise ValueError(f"TF_CONFIG `cluster.chief` must list one task, not {len(chief)}: {chief!r}")
    workers = _job(cluster, "worker") if "worker" in cluster or not chief else []
    task = config.get("task")
    if not isinstance(task, Mapping):
        raise ValueError(f"TF_CONFIG has no `task` object: {text!r}")
    kind = task.get("type", "worker")
    if kind not in ("chief", "worker") or (kind == "chief" and not chief):
        known = "`chief` or `worker`" if chief else "`worker` (the cluster has no `chief`)"
        raise ValueError(f"TF_CONFIG task type ({kind!r}) must be {known}")
    if "index" not in task:
        raise ValueError(f"TF_CONFIG `task` has no `index`: {text!r}")
    index = task["index"]
    if kind == "chief" and index != 0:
        raise ValueError(f"TF_CONFIG task index of the chief ({index!r}) must be 0")
    if chief and kind == "worker" and isinstance(index, int) and not isinstance(index, bool):
        if not 0 <= index < len(workers):
            raise ValueError(f"the task index ({index}) must be in [0, {len(workers)}) for the cluster's workers")
        index += 1  # The chief is task 0.
    return Cluster(workers=tuple(chief) + tuple(workers), index=index, chief=bool(chief))


def _job(cluster: Mapping, name: str) -> list:
    tasks = cluster.get(name)
    if not isinstance(tasks, Sequence) or isinstance(tasks, str):
        raise ValueError(f"TF_CONFIG `cluster.{name}` must be a list of `host:port`, not {tasks!r}")
    return list(tasks)


def from_env(environ: Mapping[str, str]) -> Cluster:
    """Reads the cluster from TF_CONFIG if set, else from the template variables: TF_WORKER_HOSTS,
    TF_WORKER_PORT, the task index, and TF_CHIEF=1 for TFJob's form (the first host the `chief`)."""
    if environ.get("TF_CONFIG", "").strip():
        return from_tf_config(environ["TF_CONFIG"])
    hosts = environ.get("TF_WORKER_HOSTS")
    if hosts is None:
        raise ValueError("set either TF_CONFIG or TF_WORKER_HOSTS (with TF_TASK_INDEX)")
    port_text = environ.get("TF_WORKER_PORT", str(DEFAULT_PORT))
    if not port_text.strip().isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"`TF_WORKER_PORT` ({port_text!r}) must be an integer in [1, 65535]")
    index, index_name = task_index(environ)
    chief = environ.get("TF_CHIEF", "0").strip()
    if chief not in ("0", "1"):
        raise ValueError(f"`TF_CHIEF` ({environ['TF_CHIEF']!r}) must be 1 (the first host is the `chief`) or 0")
    return from_template(hosts, index, default_port=int(port_text), index_name=index_name, chief=chief == "1")


def task_index(environ: Mapping[str, str]) -> tuple[int, str]:
    """This worker's index, and the variable it came from: the one thing that differs per worker.

    Compose sets TF_TASK_INDEX per service; a Swarm service's replicas get `{{.Task.Slot}}`
    (counted from 1) as TF_TASK_SLOT; Kubernetes gives an Indexed Job's pods JOB_COMPLETION_INDEX.
    """
    if "TF_TASK_INDEX" in environ:
        return parse_index(environ["TF_TASK_INDEX"]), "TF_TASK_INDEX"
    if "TF_TASK_SLOT" in environ:
        slot = parse_index(environ["TF_TASK_SLOT"], name="TF_TASK_SLOT")
        if slot < 1:
            raise ValueError(f"`TF_TASK_SLOT` ({environ['TF_TASK_SLOT']!r}) counts from 1, as Swarm's task slots do")
        return slot - 1, "TF_TASK_SLOT - 1"
    if "JOB_COMPLETION_INDEX" in environ:
        return parse_index(environ["JOB_COMPLETION_INDEX"], name="JOB_COMPLETION_INDEX"), "JOB_COMPLETION_INDEX"
    raise ValueError(
        "no task index: set `TF_TASK_INDEX` (or, under Swarm, `TF_TASK_SLOT`; under a Kubernetes Indexed Job, "
        "`JOB_COMPLETION_INDEX`): each worker needs its index in the cluster"
    )

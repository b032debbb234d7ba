"""The nodes as one swarm, and the cluster as a stack across them, judged from what each node saw.

node-1 is the swarm's manager; the others join it as workers. The stack is the one
`scripts/workers.py N --target swarm --one-per-node` renders (one worker per node, names resolved
by DNS round robin on the overlay), with the image from the nodes' registry.

The verdict is the verifier's (trainer/verifier/, run on the machine as scripts/verify runs it),
on what each worker's own node says: its task's container, its exit code and its log, asked of
that node's engine. That is how a worker on a partitioned node is still heard: the machine reaches
every engine by its socket, as an operator reaches a host by its console. A worker whose node's
engine does not answer is lost with its host, and the verifier is told so (`--lost`).

Host only, standard library only.
"""

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tfcluster.cluster import compose
from tfcluster.deploy import swarm as stack_file
from tfcluster.nodes import hosts as node_hosts
from tfcluster.nodes.hosts import Host, HostError, docker
from tfcluster.paths import ROOT

STACK = "tfcn"
SERVICE = f"{STACK}_{stack_file.SWARM_SERVICE}"

SWARM_PORT = 2377
# Swarm's overlay networks come from 10.0.0.0/8 unless told: the bridge's subnet is in there.
ADDRESS_POOL = "10.214.0.0/16"
READY_TIMEOUT = 60.0
POLL = 1.0
REMOVE_TIMEOUT = 60.0
TERMINAL = {"complete", "failed", "rejected", "shutdown", "orphaned", "remove"}


# -- the swarm ---------------------------------------------------------------------------------------


def swarm_state(host: Host) -> str:
    return docker(host, "info", "--format", "{{.Swarm.LocalNodeState}}", timeout=10).stdout.strip()


def form(nodes: list[Host]) -> None:
    """node-1 the manager, every other node joined, nodes no longer wanted removed; all Ready."""
    manager = nodes[0]
    if swarm_state(manager) != "active":
        docker(manager, "swarm", "leave", "--force")  # A half-made state ("pending", "error") first.
        address = str(manager.address)
        docker(manager, "swarm", "init", "--advertise-addr", address, "--listen-addr", f"{address}:{SWARM_PORT}",
               "--default-addr-pool", ADDRESS_POOL, check=True)  # fmt: skip
    token = docker(manager, "swarm", "join-token", "--quiet", "worker", check=True).stdout.strip()
    for host in nodes[1:]:
        if swarm_state(host) != "active":
            docker(host, "swarm", "leave", "--force")
            listen = f"{host.address}:{SWARM_PORT}"
            docker(host, "swarm", "join", "--advertise-addr", str(host.address), "--listen-addr", listen,
                   "--token", token, f"{manager.address}:{SWARM_PORT}", check=True)  # fmt: skip
    wanted = {host.name: swarm_node_id(host) for host in nodes}
    for entry in swarm_nodes(manager):
        # A node taken down, or made anew under an old name, leaves an entry behind that is not it.
        if wanted.get(entry["Hostname"]) != entry["ID"]:
            docker(manager, "node", "rm", "--force", entry["ID"])
    started = time.monotonic()
    while True:
        ready = {entry["Hostname"] for entry in swarm_nodes(manager) if entry["Status"] == "Ready"}
        if ready >= set(wanted):
            return
        if time.monotonic() - started > READY_TIMEOUT:
            late = ", ".join(sorted(set(wanted) - ready))
            raise HostError(f"not Ready in the swarm within {READY_TIMEOUT:.0f}s: {late}")
        time.sleep(POLL)


def swarm_node_id(host: Host) -> str:
    return docker(host, "info", "--format", "{{.Swarm.NodeID}}", timeout=10).stdout.strip()


def swarm_nodes(manager: Host) -> list[dict]:
    listed = docker(manager, "node", "ls", "--format", "{{json .}}", timeout=30, check=True).stdout
    return [json.loads(line) for line in listed.splitlines() if line.strip()]


# -- the stack ---------------------------------------------------------------------------------------


def render(count: int, image: str, command: list[str] | None) -> str:
    return stack_file.render(
        count, compose.resolved_model(interpolate=False), image=image, command=command, one_per_node=True
    )


def deploy(manager: Host, stack_file: Path) -> None:
    if not remove(manager):
        raise HostError(f"the last stack {STACK} was not gone within {REMOVE_TIMEOUT:.0f}s: scripts/nodes up, or down")
    docker(manager, "stack", "deploy", "--compose-file", str(stack_file), STACK, check=True, timeout=120)


def remove(manager: Host) -> bool:
    """The stack gone, its network too, so that the next one starts clean (nothing if none);
    False if something of it was still there after REMOVE_TIMEOUT."""
    label = f"label=com.docker.stack.namespace={STACK}"
    if not leftovers(manager, label):
        return True
    # Not `--detach=false`, which once waited here past two minutes for a task of a node that had
    # been partitioned: the same wait, bounded.
    docker(manager, "stack", "rm", STACK, timeout=60)
    started = time.monotonic()
    while leftovers(manager, label):
        if time.monotonic() - started > REMOVE_TIMEOUT:
            return False
        time.sleep(POLL)
    return True


def leftovers(manager: Host, label: str) -> list[str]:
    """The stack's services and networks the manager still has."""
    found = []
    for kind in ("service", "network"):
        listed = docker(manager, kind, "ls", "--quiet", "--filter", label, timeout=30)
        found += listed.stdout.split()
    return found


# -- a run -------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Worker:
    """One worker as the run saw it: where it ran, and how it ended (None while it runs)."""

    name: str  # worker-K, Swarm's slot K
    node: str = ""
    container: str = ""
    exit_code: int | None = None
    lost: str = ""  # Why it can be neither heard nor judged: its host went down, its task failed.
    log: str = ""
    task_state: str = ""  # As the manager last said.
    task_error: str = ""

    @property
    def finished(self) -> bool:
        return self.exit_code is not None or bool(self.lost)

    @property
    def status(self) -> str:
        if self.lost:
            return "lost"
        return f"exited {self.exit_code}" if self.exit_code is not None else "running"


@dataclasses.dataclass
class Fault:
    kind: str  # kill, cut
    host: Host
    at: float | None = None  # Seconds into the run when it came, once it has.

    @property
    def named(self) -> str:
        return {"kill": "host down", "cut": "host partitioned"}[self.kind]

    def apply(self) -> str:
        if self.kind == "kill":
            count = node_hosts.kill(self.host)
            return f"killed {self.host.name}: its {count} processes (engine, containerd, containers) and its link"
        node_hosts.cut(self.host)
        return f"cut {self.host.name} off: its link is down, it runs on alone"


def watch(
    nodes: list[Host],
    count: int,
    *,
    timeout: float,
    fault: Fault | None = None,
    fault_after: str = "",
    say: Callable[[str], None] = print,
) -> list[Worker]:
    """Waits until every worker has ended or is lost, or `timeout` passes; injects `fault` once
    every worker's log holds `fault_after`. Returns the workers, their logs read.

    The manager says where each task runs; from then on the worker's own node says how it is, so
    that a worker is still followed when the manager itself goes down."""
    by_name = {host.name: host for host in nodes}
    found = {f"worker-{slot}": Worker(f"worker-{slot}") for slot in range(1, count + 1)}
    started = time.monotonic()
    pending = fault
    while True:
        # The manager is asked only until every worker is placed: each docker call costs CPU that
        # the workers, on the same cores, would rather have.
        placed = tasks(nodes[0]) if not all(worker.container for worker in found.values()) else []
        for task in placed or []:
            worker = found.get(f"worker-{task['slot']}")
            if worker is not None and not worker.finished:
                worker.node, worker.container = task["node"], task["container"] or worker.container
                worker.task_state, worker.task_error = task["state"], task["error"]
        for worker in found.values():
            if worker.finished:
                continue
            if placed is None and not worker.container:
                worker.lost = f"the manager {nodes[0].name} went down before this worker was placed"
                continue
            # Its log is read while a fault waits for a line of it, and once it has ended.
            update(worker, by_name.get(worker.node), with_log=pending is not None)
        if pending and all(fault_after in worker.log for worker in found.values()):
            pending.at = time.monotonic() - started
            say(f"fault at {pending.at:.1f}s: {pending.apply()}")
            pending = None
        if all(worker.finished for worker in found.values()):
            break
        if time.monotonic() - started > timeout:
            for worker in found.values():
                if not worker.finished:
                    state = "running" if worker.container else "not started"
                    worker.lost = f"still {state} after {timeout:.0f}s (--timeout)"
            break
        time.sleep(POLL)
    return list(found.values())


def update(worker: Worker, host: Host | None, *, with_log: bool) -> None:
    """What the worker's own node says of it now: its container's state, and its log if asked or
    once it has ended."""
    if not worker.container:
        if worker.task_state in TERMINAL:
            worker.lost = f"its task was {worker.task_state}: {worker.task_error or 'no error given'}"
        return
    gone = f"its host {worker.node} went down: its engine does not answer"
    if host is None or node_hosts.engine_pid(host) is None:
        worker.lost = gone
        return
    try:
        shown = docker(
            host, "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", worker.container, timeout=10
        )
    except subprocess.TimeoutExpired:
        shown = None
    if (shown is None or shown.returncode != 0) and not node_hosts.engine_answers(host, timeout=3):
        worker.lost = gone
        return
    words = shown.stdout.split() if shown else []
    ended = shown.returncode == 0 and len(words) == 2 and words[0] in ("exited", "dead")
    if with_log or ended:
        worker.log = read_log(host, worker.container)
    if ended:
        worker.exit_code = int(words[1])


def read_log(host: Host, container: str) -> str:
    logged = docker(host, "logs", container, timeout=30)
    # The workers' stdout and stderr, kept apart here; the verifier reads lines, not their order.
    return logged.stdout + logged.stderr


def tasks(manager: Host) -> list[dict] | None:
    """The stack's worker tasks as the manager has them (slot, node, state, error, container), or
    None when the manager does not answer."""
    try:
        listed = docker(manager, "service", "ps", "--no-trunc", "--format", "{{.ID}}", SERVICE, timeout=10)
        identities = listed.stdout.split()
        if listed.returncode != 0 or not identities:
            return None if not node_hosts.engine_answers(manager, timeout=3) else []
        inspected = json.loads(docker(manager, "inspect", *identities, timeout=10, check=True).stdout)
        names = {entry["ID"]: entry["Hostname"] for entry in swarm_nodes(manager)}
    except (subprocess.TimeoutExpired, HostError, json.JSONDecodeError):
        return None
    return [
        {
            "slot": task["Slot"],
            "node": names.get(task.get("NodeID", ""), ""),
            "state": task["Status"]["State"],
            "error": task["Status"].get("Err", ""),
            "container": task["Status"].get("ContainerStatus", {}).get("ContainerID", ""),
        }
        for task in inspected
    ]


def judge(found: list[Worker], folder: Path, junit: Path | None) -> int:
    """The verifier's table and exit status, on the logs saved in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("worker-*.log"):
        stale.unlink()
    command = [str(ROOT / "scripts" / "verify"), "--workers", ",".join(worker.name for worker in found)]
    heard = [worker for worker in found if not worker.lost]
    if any(worker.exit_code is not None for worker in heard):
        command += ["--exit-codes", ",".join(f"{w.name}={w.exit_code}" for w in heard if w.exit_code is not None)]
    for worker in found:
        if worker.lost:
            command += ["--lost", f"{worker.name}={worker.lost}"]
    for worker in heard:
        (folder / f"{worker.name}.log").write_text(worker.log)
        command.append(str(folder / f"{worker.name}.log"))
    if junit:
        command += ["--junit", str(junit)]
    sys.stdout.flush()
    return subprocess.run(command).returncode

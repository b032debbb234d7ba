"""What each `scripts/nodes` command does to the hosts, once its command line is known good.

The hosts are made by tfcluster/nodes/hosts.py, the image reaches them by tfcluster/nodes/registry.py,
and the cluster runs and is judged across them by tfcluster/nodes/swarm.py; the command line is
tfcluster/commands/nodes.py. Root only. Host only, standard library only.
"""

import argparse
import contextlib
import fcntl
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tfcluster.ci import junit
from tfcluster.nodes import hosts as node_hosts
from tfcluster.nodes import registry as node_registry
from tfcluster.nodes import swarm as node_swarm
from tfcluster.nodes.hosts import Host, HostError
from tfcluster.paths import ROOT
from tfcluster.project import program
from tfcluster.project.layout import DEFAULT_IMAGE
from trainer.contract.exitcodes import ExitCode

MAX_NODES = 8
LOCK = Path("/run/tfcluster-nodes.lock")
LOGS = ROOT / ".tfcluster" / "nodes"
# The launcher's line once every worker has met the others: where training begins, for any program.
MET = "workers agree on the cluster"
FAULTS = ("kill", "cut")
# Never kept waiting for the lock: a fault is for while a run goes on, from another terminal.
UNLOCKED = ("status", "kill", "cut", "mend", "shape")

BAD_INPUT = ExitCode.CONFIG_ERROR  # A bad argument, or a machine that cannot do it (not root, no namespaces).
# Not a code of ExitCode, whose 3 is a training check: the machine's own.
STEP_FAILED = 11  # A step failed on the machine (an engine that would not start, a failed push): one line.
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C.
TERMINATED = ExitCode.TERMINATED


class Refused(Exception):
    """A bad argument, or nothing to do it to: one line, exit 2."""


def say(line: str) -> None:
    print(f"nodes | {line}", flush=True)


def perform(arguments: argparse.Namespace) -> int:
    """The command, on a machine that can have hosts; up, run and down one at a time."""
    node_hosts.preflight()
    if arguments.action in UNLOCKED:
        return status() if arguments.action == "status" else fault_command(arguments)
    with one_at_a_time():
        if arguments.action == "up":
            return up(int(arguments.target or 2), arguments.image or DEFAULT_IMAGE)
        if arguments.action == "down":
            return down()
        return run(arguments)


@contextlib.contextmanager
def one_at_a_time() -> Iterator[None]:
    """The machine's lock, waited for: two `up`s would each make the same namespaces, two runs the same stack."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("waiting for another scripts/nodes up, run or down to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# -- up, down, status --------------------------------------------------------------------------------


def set_up(image: str) -> None:
    """The project's own image as this tree would build it (a quarter of a second when it is)."""
    if image == DEFAULT_IMAGE:
        setup = subprocess.run([str(ROOT / "scripts" / "setup")])
        if setup.returncode != 0:
            how = f"exit {setup.returncode}" if setup.returncode > 0 else f"killed by signal {-setup.returncode}"
            raise HostError(f"scripts/setup failed ({how}): it said why above")


def up(count: int, image: str) -> int:
    started = time.monotonic()
    missing = node_registry.tools_missing()
    if missing:
        say(f"fetching {', '.join(missing)} from Debian's packages")
        node_registry.fetch_tools(missing)
    set_up(image)
    node_hosts.bring_up_network()
    node_hosts.bring_up_host(node_hosts.REGISTRY)
    node_registry.start()
    wanted = [node_hosts.node(number) for number in range(1, count + 1)]
    for extra in [host for host in node_hosts.present_nodes() if host not in wanted]:
        node_hosts.remove_host(extra)
        say(f"{extra.name} taken down")
    for host in wanted:
        node_hosts.bring_up_host(host)
        seconds = node_hosts.start_engine(host, insecure_registry=node_registry.ADDRESS)
        if seconds:
            say(f"{host.name} ({host.address}): engine up in {seconds:.1f}s")
    node_swarm.form(wanted)
    say(f"swarm of {count}: {wanted[0].name} manages, {', '.join(h.name for h in wanted[1:]) or 'no other node'}")
    pushed, seconds = node_registry.push(image)
    say(f"{image} {'pushed to' if pushed else 'already in'} the registry {node_registry.ADDRESS} ({seconds:.1f}s)")
    pulls = node_registry.pull_everywhere(image, wanted)
    say("pulled on " + ", ".join(f"{name} in {seconds:.1f}s" for name, seconds in pulls.items()))
    print_status(wanted)
    say(f"up in {time.monotonic() - started:.1f}s; the manager: DOCKER_HOST={wanted[0].docker_host}")
    return 0


def down() -> int:
    started = time.monotonic()
    if not node_hosts.anything_made(MAX_NODES):
        say("nothing to take down")
        return 0
    nodes = node_hosts.present_nodes()
    if nodes and node_hosts.engine_answers(nodes[0], timeout=3):
        node_swarm.remove(nodes[0])  # Its tasks stopped by their engines, before the engines stop.
    for host in [*nodes, *node_hosts.leftover_nodes(MAX_NODES), node_hosts.REGISTRY]:
        if host is node_hosts.REGISTRY:
            node_registry.stop()
        node_hosts.remove_host(host)
    node_hosts.take_down_network()
    LOCK.unlink(missing_ok=True)
    say(
        f"down: {len(nodes)} node(s), the registry, the bridge and the firewall rule removed "
        f"in {time.monotonic() - started:.1f}s"
    )
    return 0


def status() -> int:
    nodes = node_hosts.present_nodes()
    if not nodes:
        say("no nodes (scripts/nodes up N makes them)")
        return 0
    print_status(nodes)
    return 0


def print_status(nodes: list[Host], workers: dict[str, node_swarm.Worker] | None = None) -> None:
    states = {}
    manager = nodes[0]
    if node_hosts.engine_answers(manager, timeout=3):
        with contextlib.suppress(HostError):  # Not (yet) a swarm: its column says `?`.
            states = {entry["Hostname"]: entry["Status"] for entry in node_swarm.swarm_nodes(manager)}
    rows = [("node", "address", "engine", "link", "swarm", *(("worker", "status") if workers else ()))]
    for host in nodes:
        engine = "up" if node_hosts.engine_pid(host) and node_hosts.engine_answers(host, timeout=3) else "down"
        placed = [w for w in (workers or {}).values() if w.node == host.name]
        extra = (placed[0].name, placed[0].status) if placed else ("-", "-")
        rows.append(
            (
                host.name,
                str(host.address),
                engine,
                node_hosts.link_state(host),
                states.get(host.name, "?"),
                *(extra if workers else ()),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        say("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


# -- run ---------------------------------------------------------------------------------------------


def run(arguments: argparse.Namespace) -> int:
    nodes = node_hosts.present_nodes()
    count, fault = workers_and_fault(arguments, nodes)
    image = arguments.image or DEFAULT_IMAGE
    manager = nodes[0]
    command = program.split_command(arguments.command) if arguments.command else None
    set_up(image)
    pushed, _ = node_registry.push(image)
    if pushed:
        say(f"{image} changed: pushed to the registry; the nodes pull it as their tasks start")
    timeout = arguments.timeout or default_timeout(os.environ)
    with tempfile.TemporaryDirectory() as folder:
        stack = Path(folder) / "stack.json"
        stack.write_text(node_swarm.render(count, node_registry.reference(image), command))
        node_swarm.deploy(manager, stack)
        started = time.monotonic()  # The fault's time is counted from here too (swarm.watch).
        say(f"stack {node_swarm.STACK}: {count} worker(s) on {len(nodes)} node(s), waiting up to {timeout:.0f}s")
        try:
            found = node_swarm.watch(
                nodes, count, timeout=timeout, fault=fault, fault_after=arguments.fault_after, say=say
            )
            ended = time.monotonic() - started
            say(f"all ended or lost in {ended:.1f}s")
            code = report(nodes, found, arguments.junit)
        except (SystemExit, KeyboardInterrupt) as stopped:
            # Stopped (SIGTERM, Ctrl-C): a CI job's report fails with it, as scripts/run's does.
            if arguments.junit:
                status = stopped.code if isinstance(stopped, SystemExit) and isinstance(stopped.code, int) else 130
                junit.write(Path(arguments.junit), status=status, record=None, ran=True)
            raise
        finally:
            if not node_swarm.remove(manager):
                say(
                    f"the stack {node_swarm.STACK} was not gone within {node_swarm.REMOVE_TIMEOUT:.0f}s; "
                    "the next run waits for it"
                )
    if fault:
        say_how_the_fault_went(fault, nodes, arguments.fault_after, ended=ended, code=code)
    return code


def workers_and_fault(arguments: argparse.Namespace, nodes: list[Host]) -> tuple[int, node_swarm.Fault | None]:
    """How many workers and which fault, refused unless the nodes can run them now."""
    if not nodes:
        raise Refused("no nodes: scripts/nodes up N first")
    count = arguments.workers or len(nodes)
    if count > len(nodes):
        raise Refused(
            f"--workers {count}: there are {len(nodes)} nodes, and a node runs one worker (scripts/nodes up {count})"
        )
    fault = parse_fault(arguments.fault, nodes) if arguments.fault else None
    for host in nodes:
        # A task would wait for a node that cannot take it until the timeout: say so now instead.
        if not node_hosts.engine_answers(host, timeout=5):
            raise Refused(f"{host.name}'s engine is down: scripts/nodes up {len(nodes)} brings it back")
        if not node_hosts.link_state(host).startswith("up"):
            raise Refused(f"{host.name} is cut off: scripts/nodes mend {host.name} brings it back")
    return count, fault


def say_how_the_fault_went(
    fault: node_swarm.Fault, nodes: list[Host], fault_after: str, *, ended: float, code: int
) -> None:
    if fault.at is None:
        say(f"fault: none came: not every worker's log held {fault_after!r} before the run ended")
        return
    say(
        f"fault: {fault.named}: {fault.kind} {fault.host.name} at {fault.at:.1f}s; every worker ended or was "
        f"lost {ended - fault.at:.1f}s later; verdict exit {code}"
    )
    undo = f"scripts/nodes up {len(nodes)}" if fault.kind == "kill" else f"scripts/nodes mend {fault.host.name}"
    say(f"{fault.host.name} stays {'down' if fault.kind == 'kill' else 'cut off'}: {undo} brings it back")


def report(nodes: list[Host], found: list[node_swarm.Worker], junit: Path | None) -> int:
    """Where each worker ran and how it ended, what shaping did, then the verifier's verdict."""
    print_status(nodes, {worker.name: worker for worker in found})
    for host in nodes:
        counters = node_hosts.shaping_counters(host)
        if counters:
            say(
                f"{host.name}'s shaped link passed {counters['bytes']} bytes in {counters['packets']} packets, "
                f"{counters['overlimits']} held back"
            )
    code = node_swarm.judge(found, LOGS, junit)
    say(f"the workers' logs: {LOGS.relative_to(ROOT)}/")
    return code


def default_timeout(environ) -> float:
    def seconds(name: str, default: float) -> float:
        try:
            return float(environ.get(name, default))
        except ValueError:
            raise Refused(f"{name}={environ[name]!r} must be a number of seconds") from None

    return seconds("TF_JOIN_TIMEOUT", 60) + seconds("TF_RUN_TIMEOUT", 3600) + 30


# -- faults ------------------------------------------------------------------------------------------


def parse_fault(text: str, nodes: list[Host]) -> node_swarm.Fault:
    kind, equals, name = text.partition("=")
    if not equals or kind not in FAULTS:
        raise Refused(f"--fault {text!r} must be KIND=NODE with KIND one of {', '.join(FAULTS)}, e.g. kill=node-2")
    host = named_node(name, nodes, option="--fault")
    if host == nodes[0]:
        raise Refused(
            f"--fault {text}: {host.name} is the swarm's only manager, which the run needs; fault another node"
        )
    return node_swarm.Fault(kind, host)


def named_node(name: str | None, nodes: list[Host], *, option: str) -> Host:
    present = {host.name: host for host in nodes}
    if not name:
        raise Refused(f"{option} needs a node, one of {', '.join(present) or 'none (scripts/nodes up N)'}")
    if name not in present:
        raise Refused(f"{option}: no node {name!r} (the nodes: {', '.join(present) or 'none: scripts/nodes up N'})")
    return present[name]


def fault_command(arguments: argparse.Namespace) -> int:
    """kill, cut, mend or shape: done to the named node at once, whatever else is going on."""
    nodes = node_hosts.present_nodes()
    host = named_node(arguments.target, nodes, option=arguments.action)
    if arguments.action == "kill":
        say(
            f"killed {host.name}: {node_hosts.kill(host)} processes, its link dark "
            f"(scripts/nodes up {len(nodes)} brings it back)"
        )
    elif arguments.action == "cut":
        node_hosts.cut(host)
        say(f"cut {host.name} off: its link is down (scripts/nodes mend {host.name})")
    elif arguments.action == "mend":
        node_hosts.mend(host)
        say(
            f"{host.name}'s link is up"
            + ("" if node_hosts.engine_pid(host) else " (its engine is down: scripts/nodes up)")
        )
    else:
        if arguments.clear:
            node_hosts.unshape(host)
        else:
            node_hosts.shape(host, rate=arguments.rate, delay=arguments.delay)
        say(f"{host.name}'s link: {node_hosts.link_state(host)}")
    return 0

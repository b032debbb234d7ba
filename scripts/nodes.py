#!/usr/bin/env python3
"""Real hosts on one machine: Docker engines as Swarm nodes, the cluster across them, host faults.

`scripts/nodes up N` makes N hosts, each a network namespace on one bridge with a Docker engine
of its own (scripts/node_hosts.py), forms a swarm of them, and puts the image on every node from a
registry on that network (scripts/node_registry.py). `scripts/nodes run` trains the cluster as a
stack with one worker per node and judges it from what each node saw (scripts/node_swarm.py).
`kill`, `cut` and `shape` do to a host what a datacenter does; `down` takes it all away.
docs/nodes.md says what is real here and what is still shared. Root only. Host only, standard
library only.
"""

import argparse
import contextlib
import fcntl
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

import node_hosts  # scripts/node_hosts.py: Python puts this file's folder on the path.
import node_registry  # scripts/node_registry.py, the same way.
import node_swarm  # scripts/node_swarm.py, the same way.
import training_project  # scripts/training_project.py: how scripts/run reads a command and an image's name.
from commandline import Parser, whole_number  # scripts/commandline.py, the same way.
from node_hosts import Host, HostError

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_IMAGE = "tfcluster:latest"
MAX_NODES = 8
LOCK = Path("/run/tfcluster-nodes.lock")
LOGS = ROOT / ".tfcluster" / "nodes"
# The launcher's line once every worker has met the others: where training begins, for any program.
MET = "workers agree on the cluster"
FAULTS = ("kill", "cut")

BAD_INPUT = 2  # A bad argument, or a machine that cannot do it (not root, no namespaces): one line.
# Not a code of trainer/contract/exitcodes.py, whose 3 is a training check: the machine's own.
STEP_FAILED = 11  # A step failed on the machine (an engine that would not start, a failed push): one line.
VERIFICATION_FAILED = 7  # The run's verdict, as the verifier's.
TERMINATED = 143

EPILOG = f"""\
commands:
  up [N]          N nodes (default 2, at most {MAX_NODES}) in one swarm, the image on each; a node
                  killed or cut off comes back; nodes beyond N are taken down. Idempotent.
  run             the cluster as a stack across the nodes, one worker per node; the verdict
  status          each node: address, engine, link, swarm state
  kill NODE       the host dies: its engine, containerd and containers killed, its link dark
  cut NODE        the host is partitioned: its link down, it runs on alone
  mend NODE       its link up again, shaped as it was (a killed host needs `up`)
  shape NODE      its link shaped: --rate (tbf), --delay (netem, where the kernel has it), --clear
  down            everything `up` made, gone: engines, namespaces, links, mounts, cgroups, data,
                  the registry, the firewall rule. Idempotent.

examples:
  scripts/nodes up 2 && scripts/nodes run && scripts/nodes down   # 2 hosts, the cluster, gone again
  scripts/nodes up 3 && scripts/nodes run --workers 2             # 2 workers on 2 of 3 hosts
  TRAIN_EPOCHS=40 scripts/nodes run --fault kill=node-2 --fault-after 'epoch:   5/'   # a host dies
  scripts/nodes shape node-2 --rate 10mbit && scripts/nodes run  # a thin link to one host
  DOCKER_HOST=unix:///run/tfcluster-nodes/node-1/docker.sock docker node ls   # the manager itself

Every command but --help needs root: from another user, run each with sudo.

environment:
  TRAIN_*, TF_*   compose.yaml's settings, which the stack takes from here (`docker stack deploy`)

exit status:
  0    ok (run: every worker exited 0, trained with all its peers and agrees)
  2    config error: a bad argument, or a machine that cannot (not root, no namespaces, no nodes)
  11   a step failed on the machine (an engine, the registry, the swarm): one line says which
  7    verification failed (run): the verifier's table says why
  130  interrupted by Ctrl-C (a run's stack is removed first)
  143  terminated: stopped by SIGTERM (a run's stack is removed first)"""


def parser() -> Parser:
    parser = Parser(
        "nodes",
        prog="scripts/nodes",
        description=__doc__.split("\n")[0],
        epilog=EPILOG,
        value_names={
            "--workers": "a number",
            "--image": "an image",
            "--command": "a command",
            "--fault": "KIND=NODE, e.g. kill=node-2",
            "--fault-after": "a text",
            "--timeout": "seconds",
            "--junit": "a file name",
            "--rate": "a rate, e.g. 10mbit",
            "--delay": "a delay, e.g. 50ms",
        },
    )
    parser.add_argument("action", metavar="COMMAND", help="up, run, status, kill, cut, mend, shape, down (below)")
    parser.add_argument("target", nargs="?", metavar="N|NODE", help="up: how many nodes; kill, cut, mend, shape: which")
    parser.add_argument(
        "--image",
        metavar="NAME",
        help=f"up, run: the image the workers run, pushed to the nodes' registry (default: {DEFAULT_IMAGE}, "
        "which scripts/setup builds; a project of yours baked by scripts/run --bake)",
    )
    parser.add_argument(
        "--workers",
        type=whole_number(1, MAX_NODES),
        metavar="N",
        help="run: how many workers, at most one per node (default: one on every node)",
    )
    parser.add_argument("--command", metavar="CMD", help="run: what every worker runs (default: the image's own)")
    parser.add_argument(
        "--fault",
        metavar="KIND=NODE",
        help="run: kill or cut a node (not node-1, the manager) mid-training, e.g. kill=node-2 (default: none)",
    )
    parser.add_argument(
        "--fault-after",
        metavar="TEXT",
        default=MET,
        help=f"run: the fault comes once every worker's log holds TEXT (default: {MET!r}, the launcher's "
        "line when all have met)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="run: how long to wait for the workers (default: TF_JOIN_TIMEOUT + TF_RUN_TIMEOUT + 30)",
    )
    parser.add_argument("--junit", type=Path, metavar="FILE", help="run: also write the verdict as JUnit XML")
    parser.add_argument("--rate", metavar="RATE", help="shape: the link's rate, as tc writes it (10mbit, 500kbit)")
    parser.add_argument("--delay", metavar="DELAY", help="shape: the link's added delay, as tc writes it (50ms)")
    parser.add_argument("--clear", action="store_true", help="shape: no shaping on the link any more")
    return parser


class Refused(Exception):
    """A bad argument, or nothing to do it to: one line, exit 2."""


def say(line: str) -> None:
    print(f"nodes | {line}", flush=True)


# -- commands ----------------------------------------------------------------------------------------


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


def run(arguments: argparse.Namespace) -> int:
    nodes = node_hosts.present_nodes()
    if not nodes:
        raise Refused("no nodes: scripts/nodes up N first")
    count = arguments.workers or len(nodes)
    if count > len(nodes):
        raise Refused(
            f"--workers {count}: there are {len(nodes)} nodes, and a node runs one worker (scripts/nodes up {count})"
        )
    fault = parse_fault(arguments.fault, nodes) if arguments.fault else None
    image = arguments.image or DEFAULT_IMAGE
    manager = nodes[0]
    for host in nodes:
        # A task would wait for a node that cannot take it until the timeout: say so now instead.
        if not node_hosts.engine_answers(host, timeout=5):
            raise Refused(f"{host.name}'s engine is down: scripts/nodes up {len(nodes)} brings it back")
        if not node_hosts.link_state(host).startswith("up"):
            raise Refused(f"{host.name} is cut off: scripts/nodes mend {host.name} brings it back")
    command = training_project.split_command(arguments.command) if arguments.command else None
    set_up(image)
    pushed, _ = node_registry.push(image)
    if pushed:
        say(f"{image} changed: pushed to the registry; the nodes pull it as their tasks start")
    timeout = arguments.timeout or default_timeout(os.environ)
    with tempfile.TemporaryDirectory() as folder:
        stack = Path(folder) / "stack.json"
        stack.write_text(node_swarm.render(count, node_registry.reference(image), command))
        node_swarm.deploy(manager, stack)
        started = time.monotonic()  # The fault's time is counted from here too (node_swarm.watch).
        say(f"stack {node_swarm.STACK}: {count} worker(s) on {len(nodes)} node(s), waiting up to {timeout:.0f}s")
        try:
            found = node_swarm.watch(
                nodes, count, timeout=timeout, fault=fault, fault_after=arguments.fault_after, say=say
            )
            ended = time.monotonic() - started
            say(f"all ended or lost in {ended:.1f}s")
            code = report(nodes, found, arguments.junit)
        finally:
            if not node_swarm.remove(manager):
                say(
                    f"the stack {node_swarm.STACK} was not gone within {node_swarm.REMOVE_TIMEOUT:.0f}s; "
                    "the next run waits for it"
                )
    if fault and fault.at is None:
        say(f"fault: none came: not every worker's log held {arguments.fault_after!r} before the run ended")
    elif fault:
        say(
            f"fault: {fault.named}: {fault.kind} {fault.host.name} at {fault.at:.1f}s; every worker ended or was "
            f"lost {ended - fault.at:.1f}s later; verdict exit {code}"
        )
        undo = f"scripts/nodes up {len(nodes)}" if fault.kind == "kill" else f"scripts/nodes mend {fault.host.name}"
        say(f"{fault.host.name} stays {'down' if fault.kind == 'kill' else 'cut off'}: {undo} brings it back")
    return code


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


def default_timeout(environ) -> float:
    def seconds(name: str, default: float) -> float:
        try:
            return float(environ.get(name, default))
        except ValueError:
            raise Refused(f"{name}={environ[name]!r} must be a number of seconds") from None

    return seconds("TF_JOIN_TIMEOUT", 60) + seconds("TF_RUN_TIMEOUT", 3600) + 30


def fault_command(arguments: argparse.Namespace) -> int:
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


COMMANDS = ("up", "run", "status", "kill", "cut", "mend", "shape", "down")
OPTIONS_OF = {
    "up": {"image"},
    "run": {"image", "workers", "command", "fault", "fault_after", "timeout", "junit"},
    "shape": {"rate", "delay", "clear"},
}


def check(arguments: argparse.Namespace, fail) -> None:
    """Each option only with its command, a target only where one is taken: one line otherwise."""
    if arguments.action not in COMMANDS:
        from commandline import suggestion

        fail(
            f"unknown command {arguments.action!r}{suggestion(arguments.action, COMMANDS, 0.6)} "
            f"(commands: {', '.join(COMMANDS)})"
        )
    defaults = vars(parser().parse_args([arguments.action]))
    for option, value in vars(arguments).items():
        if (
            option not in ("action", "target")
            and value != defaults[option]
            and option not in OPTIONS_OF.get(arguments.action, set())
        ):
            fail(f"--{option.replace('_', '-')} is not an option of {arguments.action}")
    takes_target = arguments.action in ("up", "kill", "cut", "mend", "shape")
    if arguments.target is not None and not takes_target:
        fail(f"{arguments.action} takes no {arguments.target!r}")
    if arguments.action == "up" and arguments.target is not None:
        try:
            whole_number(1, MAX_NODES)(arguments.target)
        except argparse.ArgumentTypeError as error:
            fail(f"up: the number of nodes {error}")
    if arguments.timeout is not None and not (math.isfinite(arguments.timeout) and arguments.timeout > 0):
        fail(f"--timeout ({arguments.timeout:g}) must be a positive number of seconds")
    if arguments.action == "shape" and arguments.clear == bool(arguments.rate or arguments.delay):
        fail("shape needs --rate and/or --delay, or --clear alone")
    try:
        if arguments.command is not None:
            training_project.split_command(arguments.command)
        if arguments.image is not None:
            training_project.check_image(arguments.image, option="--image", digest=False)
    except training_project.Refusal as refusal:
        fail(str(refusal))


def _terminated(_signum, _frame) -> NoReturn:
    print("nodes: stopped by SIGTERM", file=sys.stderr, flush=True)
    sys.exit(TERMINATED)


def main(argv: list[str]) -> int:
    commands = parser()
    arguments = commands.parse_args(argv)
    check(arguments, commands.fail)
    signal.signal(signal.SIGTERM, _terminated)
    try:
        node_hosts.preflight()
        if arguments.action in ("status", "kill", "cut", "mend", "shape"):
            # Never kept waiting: a fault is for while a run goes on, from another terminal.
            return status() if arguments.action == "status" else fault_command(arguments)
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(LOCK, "w") as lock:
            # One at a time: two `up`s would each make the same namespaces, two runs the same stack.
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                say("waiting for another scripts/nodes up, run or down to finish")
                fcntl.flock(lock, fcntl.LOCK_EX)
            if arguments.action == "up":
                return up(int(arguments.target or 2), arguments.image or DEFAULT_IMAGE)
            if arguments.action == "down":
                return down()
            return run(arguments)
    except (Refused, HostError) as error:
        print(f"nodes: {error}", file=sys.stderr)
        # Unable: this machine cannot have hosts at all, which no retry mends; any other HostError
        # is a step that failed.
        return BAD_INPUT if isinstance(error, (Refused, node_hosts.Unable)) else STEP_FAILED
    except subprocess.TimeoutExpired as error:
        print(f"nodes: {' '.join(map(str, error.cmd[:4]))} did not answer within {error.timeout:.0f}s", file=sys.stderr)
        return STEP_FAILED
    except subprocess.CalledProcessError as error:
        said = (error.stderr or "").strip().splitlines()
        print(
            f"nodes: {' '.join(map(str, error.cmd[:4]))} failed: {said[-1] if said else error.returncode}",
            file=sys.stderr,
        )
        return STEP_FAILED
    except OSError as error:
        print(f"nodes: {error.filename or 'the machine'}: {error.strerror or error}", file=sys.stderr)
        return STEP_FAILED
    except KeyboardInterrupt:
        print("nodes: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

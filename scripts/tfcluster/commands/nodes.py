#!/usr/bin/env python3
"""Real hosts on one machine: Docker engines as Swarm nodes, the cluster across them, host faults.

The command line of `scripts/nodes`: what each command does is tfcluster/nodes/operations.py,
and docs/nodes.md says what is real here and what is still shared. Host only, standard library only.
"""

import argparse
import math
import signal
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

from tfcluster import errors
from tfcluster.commands.parsing import Parser, suggestion, whole_number
from tfcluster.nodes import hosts as node_hosts
from tfcluster.nodes import operations
from tfcluster.nodes.hosts import HostError
from tfcluster.nodes.operations import DEFAULT_IMAGE, MAX_NODES, MET
from tfcluster.project import baking, program

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
    add_run_options(parser)
    add_shape_options(parser)
    return parser


def add_run_options(parser: Parser) -> None:
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


def add_shape_options(parser: Parser) -> None:
    parser.add_argument("--rate", metavar="RATE", help="shape: the link's rate, as tc writes it (10mbit, 500kbit)")
    parser.add_argument("--delay", metavar="DELAY", help="shape: the link's added delay, as tc writes it (50ms)")
    parser.add_argument("--clear", action="store_true", help="shape: no shaping on the link any more")


COMMANDS = ("up", "run", "status", "kill", "cut", "mend", "shape", "down")
OPTIONS_OF = {
    "up": {"image"},
    "run": {"image", "workers", "command", "fault", "fault_after", "timeout", "junit"},
    "shape": {"rate", "delay", "clear"},
}


def check(arguments: argparse.Namespace, fail) -> None:
    """Each option only with its command, a target only where one is taken: one line otherwise."""
    if arguments.action not in COMMANDS:
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
            program.split_command(arguments.command)
        if arguments.image is not None:
            baking.check_image(arguments.image, option="--image", digest=False)
    except errors.Refusal as refusal:
        fail(str(refusal))


def _terminated(_signum, _frame) -> NoReturn:
    print("nodes: stopped by SIGTERM", file=sys.stderr, flush=True)
    sys.exit(operations.TERMINATED)


def main(argv: list[str]) -> int:
    commands = parser()
    arguments = commands.parse_args(argv)
    check(arguments, commands.fail)
    signal.signal(signal.SIGTERM, _terminated)
    try:
        return operations.perform(arguments)
    except (operations.Refused, HostError) as error:
        print(f"nodes: {error}", file=sys.stderr)
        # Unable: this machine cannot have hosts at all, which no retry mends; any other HostError
        # is a step that failed.
        unable = isinstance(error, (operations.Refused, node_hosts.Unable))
        return operations.BAD_INPUT if unable else operations.STEP_FAILED
    except subprocess.TimeoutExpired as error:
        print(f"nodes: {' '.join(map(str, error.cmd[:4]))} did not answer within {error.timeout:.0f}s", file=sys.stderr)
        return operations.STEP_FAILED
    except subprocess.CalledProcessError as error:
        said = (error.stderr or "").strip().splitlines()
        print(
            f"nodes: {' '.join(map(str, error.cmd[:4]))} failed: {said[-1] if said else error.returncode}",
            file=sys.stderr,
        )
        return operations.STEP_FAILED
    except OSError as error:
        print(f"nodes: {error.filename or 'the machine'}: {error.strerror or error}", file=sys.stderr)
        return operations.STEP_FAILED
    except KeyboardInterrupt:
        print("nodes: interrupted", file=sys.stderr)
        return operations.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

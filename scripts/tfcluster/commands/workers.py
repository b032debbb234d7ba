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

import sys

from tfcluster.cluster import compose, scaling
from tfcluster.cluster.scaling import MAX_WORKERS
from tfcluster.commands.parsing import BAD_ARGUMENTS, Parser, one_of
from tfcluster.deploy import kubernetes, swarm
from tfcluster.errors import Refusal
from tfcluster.project import baking, program

TARGETS = ("compose", "swarm", "kubernetes")

EPILOG = f"""\
examples:
  scripts/workers.py 4 --output compose.workers.yaml                 # a Compose override
  docker compose -f compose.yaml -f compose.workers.yaml up --exit-code-from verifier verifier
  scripts/workers.py 3 --target swarm > stack.yaml                   # a stack: one service, 3 replicas
  scripts/workers.py 3 --target swarm --one-per-node > stack.yaml    # one worker per node, no verifier
  scripts/workers.py 4 --target kubernetes > tfcluster.yaml          # headless Service + Indexed Job
  scripts/workers.py 3 --project --data -o compose.workers.yaml      # your project and data on each
  scripts/workers.py 4 --network -o compose.workers.yaml             # with compose.network.yaml: 4 shapers
  TF_NETWORK_PROFILE=wan docker compose -f compose.yaml -f compose.workers.yaml -f compose.network.yaml \
    up --exit-code-from verifier verifier
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
    add_compose_options(parser)
    add_deploy_options(parser)
    return parser


def add_compose_options(parser: Parser) -> None:
    """The Compose target's options: what every worker runs, as the Compose files say."""
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
        "--network",
        action="store_true",
        help="compose only, for a run with compose.network.yaml after this file: every worker gets "
        "TF_NETWORK_PROFILE and a shaper of its own, as compose.network.yaml's two do (2 or more workers; "
        "default: off)",
    )


def add_deploy_options(parser: Parser) -> None:
    """The swarm and kubernetes targets' options, and where the rendering goes."""
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


def refusal(arguments) -> str | None:
    """Why the options cannot go together, in one line, or None if they can."""
    chosen = [option for option in ("own_trainer", "project", "baked", "data", "network") if getattr(arguments, option)]
    if chosen and arguments.target != "compose":
        return f"--{chosen[0].replace('_', '-')} is for the Compose target only"
    given = [option for option in ("image", "command") if getattr(arguments, option) is not None]
    if given and arguments.target == "compose":
        return f"--{given[0]} is for the swarm and kubernetes targets (Compose: --project --baked)"
    if arguments.one_per_node and arguments.target != "swarm":
        return "--one-per-node is for the swarm target only"
    if arguments.own_trainer and arguments.project:
        return "--own-trainer and --project do not go together"
    if arguments.data and not arguments.project:
        return "--data goes with --project (your data, for your project)"
    if arguments.baked and not arguments.project:
        return "--baked goes with --project (your project, baked into an image)"
    if arguments.network and int(arguments.workers) < 2:
        return "--network shapes the links between workers: it needs 2 or more"
    return None


def main(argv: list[str]) -> int:
    arguments = parser().parse_args(argv)
    try:
        count = int(arguments.workers)
        scaling.check_count(count)
    except ValueError:
        print(
            f"workers.py: the number of workers must be a whole number from 1 to {MAX_WORKERS}, "
            f"got {arguments.workers!r}",
            file=sys.stderr,
        )
        return BAD_ARGUMENTS
    refused = refusal(arguments)
    if refused:
        print(f"workers.py: {refused}", file=sys.stderr)
        return BAD_ARGUMENTS
    try:
        command = None if arguments.command is None else program.split_command(arguments.command)
        if arguments.image is not None:
            baking.check_image(arguments.image, option="--image", digest=True)
    except Refusal as error:
        print(f"workers.py: {error}", file=sys.stderr)
        return BAD_ARGUMENTS
    if arguments.target == "compose":
        text = scaling.render(
            count,
            own_trainer=arguments.own_trainer,
            project=arguments.project,
            baked=arguments.baked,
            data=arguments.data,
            network=arguments.network,
        )
    elif arguments.target == "swarm":
        # Uninterpolated: `docker stack deploy` fills in ${TRAIN_EPOCHS:-3} and the rest itself.
        text = swarm.render(
            count,
            compose.resolved_model(interpolate=False),
            image=arguments.image,
            command=command,
            one_per_node=arguments.one_per_node,
        )
    else:
        text = kubernetes.render(
            count, compose.resolved_model(interpolate=True), image=arguments.image, command=command
        )
    if arguments.output:
        with open(arguments.output, "w", encoding="utf-8") as output:
            output.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""scripts/run: set up what is missing, train the cluster, print the verdict (its exit status).

The command line over the Python API (tfcluster/cluster/api.py): its parser, and `main`, which
turns the arguments into a `Cluster` and runs it, or with --dry-run prints its plan. Everything is
checked before anything starts, so that a typo costs nothing. Standard library only: it must run on
a machine with nothing but python3 and Docker.
"""

import argparse
import os
import signal
import sys
import textwrap

from tfcluster.cluster import cancel, dryrun, scaling, slowdown
from tfcluster.cluster.api import PROJECT_NAME, Cluster, execute
from tfcluster.cluster.plan import PROFILES
from tfcluster.commands.parsing import HELP_WIDTH, Parser, one_of, whole_number
from tfcluster.errors import Refusal
from tfcluster.project import baking, layout, names
from trainer.contract.faults import GRAMMAR
from trainer.contract.links import GRAMMAR as LINK_GRAMMAR

DESCRIPTION = """\
Sets up what is missing (scripts/setup), trains the cluster and prints the verdict: every worker
is a container of its own on a private network, and the verifier checks that all of them finished
the same synchronized training. Arguments are checked before anything starts."""


def _reserved_names() -> str:
    """The epilog's paragraph on the names --env may not set, made from tfcluster/project/names.py's lists."""
    harness = (*names.HARNESS_NAMES, *(f"{prefix}*" for prefix in names.HARNESS_PREFIXES))
    settings = (*(f"{prefix}*" for prefix in names.SETTING_PREFIXES), *names.SETTING_NAMES)
    text = (
        f"--env and --env-file may not set the harness's own names: {', '.join(harness)}; nor its "
        f"settings, which are set in scripts/run's environment instead: {', '.join(settings)}."
    )
    return textwrap.fill(
        text, HELP_WIDTH, initial_indent="  ", subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )


RESERVED_NAMES = _reserved_names()

EPILOG = f"""\
your project (--project DIR; docs/bring-your-own.md):
  every worker runs CMD in /project, DIR mounted read-only, with TF_CONFIG set by the harness;
  a command that runs python checks here first that its script (a path, from DIR) or module
  (-m PKG.MOD: DIR/PKG/MOD.py or DIR/PKG/MOD/__main__.py; or trainer.*, the image's) exists.
{RESERVED_NAMES}
  Requirements are pip specifiers, one a line (no options, URLs or paths), held to the image's pins;
  they are installed in an image of their own, {layout.IMAGE_REPOSITORY}:HASH.
  --bake copies DIR into an image of its own instead of mounting it (docker/Dockerfile.project, on
  the image above or tfcluster:latest), for a Docker that cannot see this machine's folders (a CI
  `container:` job). Left out: what DIR/.dockerignore names, __pycache__, .git, virtual
  environments and the --data folder (data stays mounted). It is named {baking.BAKED_REPOSITORY}:HASH after
  the files and the base image's id (a run removes the folder's superseded ones), or --tag NAME.

environment:
  TRAINER_SCRIPT        your own training script, run by every worker instead of the built-in
                        trainer (compose.byo.yaml); a path from where you are (default: unset);
                        the one-file form of --project, not with it
  EXTRA_REQUIREMENTS    your trainer's own packages, installed in the image (scripts/setup --help);
                        with --project, its requirements file instead
  TFCLUSTER_IMAGE       the image to build and run (default: tfcluster:latest, or with your
                        project's requirements {layout.IMAGE_REPOSITORY}:HASH)
  TRAIN_*, TF_*         the training and cluster settings, e.g. TRAIN_EPOCHS=5 (docs/settings.md)
  COMPOSE_PROJECT_NAME  the Compose project to run as by default (default: compose.yaml's name,
                        tfcluster); while another run holds it, NAME-2, NAME-3... (--name: exactly)

examples:
  scripts/run                          # the two workers of compose.yaml
  scripts/run --workers 4 --recover    # four workers; a failure restarts them all
  scripts/run --slow worker-1=0.25     # worker-1 on a quarter of a core: the verdict names the straggler
  scripts/run --dev                    # after editing trainer/: its code mounted, no rebuild
  scripts/run --warm                   # on warm workers: TensorFlow imported once, each run forked
  scripts/run --warm-down              # take the warm workers down
  scripts/run --project examples/keras-fit --env TF_USE_LEGACY_KERAS=1   # your project, python train.py
  scripts/run --project ~/model --command "python -m model.train --fast" --data ~/datasets/model \\
    --env-file ~/model/cluster.env --workers 3 --dry-run      # what it would do, not done
  scripts/run --project examples/custom-loop --bake    # the project in an image, not mounted (CI)
  TRAINER_SCRIPT=./train.py scripts/run --network wan   # one script of your own, on shaped links

exit status (the verifier's, once the cluster has run):
  0    ok: every worker exited 0, trained with all its peers and agrees
  2    config error: a bad argument or setting, named in one line (nothing was started), or
       scripts/setup could not proceed (Docker missing or not running, a requirement that
       conflicts with the image's pins or cannot be downloaded)
  7    verification failed: the verifier's table says why
  143  terminated: the verifier was stopped before a verdict, or the run by SIGTERM
  130, 129, 141  stopped by SIGINT or SIGHUP, or by its output's reader going away (`| head`):
       the cluster was stopped, the report fails
  any other: set-up, Docker or Compose failed, and said why

Worker names are worker-0 to worker-N-1 (worker-0 is the chief). At most {scaling.MAX_WORKERS} workers."""


def parser() -> Parser:
    parser = Parser(
        "run",
        prog="scripts/run",
        description=DESCRIPTION,
        epilog=EPILOG,
        value_names={
            "--workers": "a number",
            "--network": "a profile",
            "--fault": "a clause",
            "--link": "a clause",
            "--slow": "NAME=CPUS",
            "--project": "a folder",
            "--command": "a command",
            "--data": "a folder",
            "--env": "NAME=VALUE",
            "--env-file": "a file",
            "--requirements": "a file",
            "--tag": "an image name",
            "--junit": "a file",
            "--report": "a file",
            "--name": "a Compose project name",
        },
    )
    add_cluster_options(parser)
    add_project_options(parser)
    add_output_options(parser)
    return parser


def add_cluster_options(parser: Parser) -> None:
    """The cluster's own options: how many workers, recovery, the network, CPUs, the code."""
    parser.add_argument(
        "--workers",
        type=whole_number(1, scaling.MAX_WORKERS),
        default=scaling.DEFAULT_WORKERS,
        metavar="N",
        help=f"how many workers, 1 to {scaling.MAX_WORKERS} (default: {scaling.DEFAULT_WORKERS}, compose.yaml's "
        "own); another number is rendered into compose.workers.yaml by scripts/workers.py",
    )
    parser.add_argument(
        "--recover",
        action="store_true",
        help="add the keeper (compose.recovery.yaml): after a failure it restarts the whole cluster, "
        "which resumes from the last checkpoint (default: off)",
    )
    add_network_options(parser)
    parser.add_argument(
        "--chief",
        action="store_true",
        help="TF_CONFIG in TFJob's form (as AI Platform and Vertex write it too): worker-0 is the `chief` "
        "and the other workers the `worker` job, for a program that expects one (TF_CHIEF=1; default: "
        "off, every worker a `worker`)",
    )
    parser.add_argument(
        "--slow",
        action="append",
        type=slowdown.assignments,
        default=[],
        metavar="NAME=CPUS",
        help="limit worker NAME to CPUS cores (a positive number, at most the machine's), to see a "
        "straggler; repeatable or comma-separated (written to the run's folder, "
        f".tfcluster/runs/NAME/{slowdown.SLOW_FILE}; default: every worker gets TF_WORKER_CPUS)",
    )
    parser.add_argument(
        "--dev",
        action="store_true",
        help="development mode: this checkout's trainer/ mounted read-only over the image's, so that an "
        "edit of the launcher, verifier or built-in trainer runs with no image build "
        "(.tfcluster/runs/NAME/compose.dev.yaml; the image is built only when its dependencies change; "
        "default: off, the image's code)",
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="run on the warm cluster: its workers stay up between runs, each holding TensorFlow imported, and "
        "every run forks its program from there (brought up on first use, and again when the image or the "
        "configuration changes; not with --recover; default: off, a fresh cluster per run)",
    )
    parser.add_argument(
        "--warm-down",
        action="store_true",
        help="take the warm cluster down (its containers, network, volumes and files in .tfcluster) and exit",
    )


def add_network_options(parser: Parser) -> None:
    """The links between the workers: their profile, and faults timed by training progress."""
    parser.add_argument(
        "--network",
        type=one_of(*PROFILES),
        metavar="PROFILE",
        help=f"shape the links between the workers: {', '.join(PROFILES[:-1])} or {PROFILES[-1]} (a shaper by "
        "each, compose.network.yaml; default: none, unshaped); not with --workers 1",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="CLAUSE",
        help=f"with --network: when the training gets there, cut a worker off or give links another profile, "
        f"then undo it: '{GRAMMAR}', such as 'cut worker-1 at step 8 for 5s', 'cut worker-2 out at epoch 2 "
        "for 30s' or 'worker-0,worker-1 <-> worker-2,worker-3: thin at step 20 for 10s'; the verdict records "
        "each (repeat it for more; default: none)",
    )
    parser.add_argument(
        "--link",
        action="append",
        default=[],
        metavar="CLAUSE",
        help=f"with --network: links that differ from its profile: '{LINK_GRAMMAR}', such as "
        "'worker-0,worker-1 <-> worker-2,worker-3: wan' (two racks, a slow link between them), "
        "'worker-3 <-> *: wan' (one distant worker) or 'worker-0 -> worker-1: lossy' (one way); a later "
        "clause wins (repeat it for more; default: none, one profile for every link)",
    )


def add_project_options(parser: Parser) -> None:
    """Your project and what goes with it (docs/bring-your-own.md)."""
    parser.add_argument(
        "--project",
        metavar="DIR",
        help="your training project, from where you are: mounted read-only at /project on every worker, "
        "which runs your command there (compose.project.yaml; default: none, the built-in trainer)",
    )
    parser.add_argument(
        "--command",
        metavar="CMD",
        help="with --project: the command every worker runs in /project, split as a shell would "
        "(default: python train.py, if DIR has train.py)",
    )
    parser.add_argument(
        "--data",
        metavar="DIR",
        help="with --project: a folder mounted read-only at /data on every worker, which finds it in "
        "TFCLUSTER_DATA_DIR (compose.data.yaml; default: none)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --project: a variable of your program's environment on every worker; repeatable, "
        "and wins over --env-file (default: none)",
    )
    parser.add_argument(
        "--env-file",
        action="append",
        default=[],
        metavar="FILE",
        help="with --project: variables from a file in Compose's env_file syntax (NAME=VALUE lines, "
        "# comments); repeatable, a later file winning (default: none)",
    )
    parser.add_argument(
        "--requirements",
        metavar="FILE",
        help="with --project: your packages, pip requirement specifiers one a line, installed in the "
        "image (default: DIR/requirements.txt, if there is one)",
    )
    parser.add_argument(
        "--bake",
        action="store_true",
        help="with --project: copy DIR into an image of its own (docker/Dockerfile.project) and run that, "
        "with no bind mount of DIR, for a Docker that cannot see this machine's folders (compose.baked.yaml; "
        "default: off, DIR is mounted)",
    )
    parser.add_argument(
        "--tag",
        metavar="NAME",
        help=f"with --bake: the baked image's name (default: {baking.BAKED_REPOSITORY}:HASH, "
        "12 hex digits of a digest of the files sent and the base image's id)",
    )


def add_output_options(parser: Parser) -> None:
    """What the run leaves besides its verdict, or does instead of running."""
    parser.add_argument(
        "--junit",
        metavar="FILE",
        help="also write the verdict as JUnit XML to FILE, from where you are, whatever the run's end: one "
        "case per worker, one for their model states, one for their data (skipped when not observed) and one "
        "for their metrics, from the verifier's own verdict; a run that ends before a verdict, or fails where "
        "the verdict passed, fails a case of its own (default: none)",
    )
    parser.add_argument(
        "--report",
        metavar="FILE",
        help="where the run's report goes, one self-contained HTML page (docs/report.md), from where you are "
        "(default: beside --junit's FILE, as FILE.html, else .tfcluster/runs/NAME/report.html); the run says "
        "where it wrote it, last",
    )
    parser.add_argument(
        "--name",
        type=_project_name,
        metavar="NAME",
        help="the Compose project to run as, exactly (`docker compose -p NAME logs` finds it), refused while "
        "another run holds it; a run of another name never touches it (default: COMPOSE_PROJECT_NAME, else "
        "compose.yaml's, tfcluster, or while another run of this checkout holds that, tfcluster-2, -3...)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be done (the Compose files, the project, each worker's settings, what "
        "would be built) and exit 0; nothing is set up, built, written or started (default: off)",
    )


def _project_name(text: str) -> str:
    """An argparse type: a Compose project name (`docker compose -p`'s rule)."""
    if not PROJECT_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Compose project name: lower-case letters, digits, - and _")
    return text


def cluster_of(arguments: argparse.Namespace, environ) -> Cluster:
    """The Cluster the arguments ask for (checked when it is planned)."""
    return Cluster(
        workers=arguments.workers,
        recover=arguments.recover,
        network=arguments.network,
        slow=arguments.slow,
        dev=arguments.dev,
        project=arguments.project,
        command=arguments.command,
        data=arguments.data,
        env=tuple(arguments.env),
        env_files=tuple(arguments.env_file),
        requirements=arguments.requirements,
        bake=arguments.bake,
        tag=arguments.tag,
        junit=arguments.junit,
        report=arguments.report,
        name=arguments.name,
        warm=arguments.warm,
        chief=arguments.chief,
        faults=tuple(arguments.fault),
        links=tuple(arguments.link),
        environ=environ,
    )


def main(argv: list[str], environ=None, *, first=None) -> int:
    """scripts/run; `first`, if given, is called once the plan is made and checked, before the run
    (scripts/ci-run's removal of what killed jobs left)."""
    environ = os.environ if environ is None else environ
    command_line = parser()
    arguments = command_line.parse_args(argv)
    cluster = cluster_of(arguments, environ)
    if arguments.warm_down:
        return 0 if cluster.warm_down() == 0 else 1
    try:
        # The plan is made, and so checked, in both cases before anything is done.
        plan = cluster.plan(collects=False)
    except Refusal as refusal:
        command_line.fail(str(refusal))
    if arguments.dry_run:
        try:
            sys.stdout.write(dryrun.describe(plan, environ))
        except LookupError as error:
            # compose.yaml no longer laid out as the dry run reads it: a bug of this command's.
            print(f"run: --dry-run: {error}", file=sys.stderr)
            return 1
        return 0
    with cancel.outliving_readers():  # `scripts/run | head`: cancelled as by SIGPIPE, not a traceback.
        return execute(plan, environ, first=first).status


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        # Ctrl-C outside the run itself (in the set-up, say): its output has said enough.
        sys.exit(128 + signal.SIGINT)

"""`tfcluster`: a checkout's commands, installed, run from your project's folder.

    tfcluster run [scripts/run's options]     # this folder is the project (--project DIR: another)
    tfcluster verify | setup | nodes ...      # scripts/verify, scripts/setup, scripts/nodes

Each is the checkout's command, as it is there, run from the harness's per-user root
(tfcluster/home.py), so `tfcluster run --help` is `scripts/run --help`. What `run` adds: without
--project it runs the project you are in, `--project .`.
"""

import os
import sys
from importlib import metadata

from tfcluster.errors import VALUE_CUTOFF, suggestion

# tfcluster COMMAND: the checkout's script of that name (scripts/run, scripts/verify...).
COMMANDS = ("run", "verify", "setup", "nodes")
# With any of these, `run` is asked for something else than a run of this folder.
NOT_THIS_FOLDER = ("--project", "-h", "--help", "--warm-down")

USAGE = """\
usage: tfcluster COMMAND [ARGUMENT...]

Runs and verifies multi-worker TensorFlow training, every worker a container of its own, on this
machine. The commands are a checkout's, from the harness's per-user copy of its files
(TFCLUSTER_HOME, default ~/.cache/tfcluster/home); `tfcluster COMMAND --help` for each.

commands:
  run      set up what is missing, train the cluster, print the verdict (exit status = verdict);
           the project is the folder you are in, unless --project DIR (scripts/run)
  verify   the verifier on saved logs (scripts/verify)
  setup    install what is missing: Compose v2, base image, wheels, the image (scripts/setup)
  nodes    real hosts on one machine: engines in network namespaces (scripts/nodes)

options:
  -h, --help  show this help message and exit
  --version   print tfcluster's version and exit

exit status: the command's; 2 for a command that is not one of these."""


def _version() -> str:
    try:
        return metadata.version("tfcluster")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _arguments(command: str, arguments: list[str]) -> list[str]:
    if command == "run" and not os.environ.get("TRAINER_SCRIPT"):
        given = {argument.split("=", 1)[0] for argument in arguments}
        if not given & set(NOT_THIS_FOLDER):
            return ["--project", os.getcwd(), *arguments]
    return arguments


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"tfcluster {_version()}")
        return 0
    command, arguments = argv[0], argv[1:]
    if command not in COMMANDS:
        hint = suggestion(command, COMMANDS, VALUE_CUTOFF)
        print(f"tfcluster: unknown command '{command}'{hint} (one of {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    from tfcluster import paths  # The root, copied or brought up to date on first use.

    script = str(paths.ROOT / "scripts" / command)
    os.execv(script, [script, *_arguments(command, arguments)])


if __name__ == "__main__":
    sys.exit(main())

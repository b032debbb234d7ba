"""scripts/ci-run: one CI step, scripts/run from TFCLUSTER_CI_* variables, the verdict as JUnit XML.

The GitHub action (action.yml) and the GitLab job template (ci/tfcluster.gitlab-ci.yml) both run
it, each passing its inputs as these variables. It runs scripts/run in this same process rather
than as a child: a cancelled job's SIGTERM then reaches the run itself, which stops its cluster and
writes a failing report (tfcluster/cluster/cancel.py), where a wrapper would die alone and leave
the run training to a passing report.

Before it runs, it removes what jobs killed outright left on this engine: clusters whose run is
gone without ending (tfcluster/cluster/orphans.py), never a live run's, saying what it removed.
"""

import os
import signal
import subprocess
import sys

from tfcluster.cluster import orphans
from tfcluster.commands import run
from tfcluster.commands.parsing import Parser

DESCRIPTION = """\
Runs scripts/run as one step of your CI pipeline, from where you are (your repository's checkout),
with the options these variables give, writes the verdict as JUnit XML, and exits with the
verdict's status (docs/ci.md, "In your own pipeline"). Takes no arguments: CI systems pass inputs
as variables. SIGINT, SIGTERM or SIGHUP (a cancelled job) stops the cluster, writes a failing
report and exits 130, 143 or 129. First it removes the clusters of earlier runs that were killed
outright (SIGKILL, a dead runner) and left training, found by their records on this host
(/tmp/tfcluster-claims), and says so; never a live run's."""

EPILOG = """\
environment:
  TFCLUSTER_CI_PROJECT   your training project's folder, from where you are (--project; default:
                         empty, the built-in trainer)
  TFCLUSTER_CI_COMMAND   the command every worker runs in it (--command; default: python train.py)
  TFCLUSTER_CI_WORKERS   how many workers (--workers; default: 2)
  TFCLUSTER_CI_NETWORK   a network profile: lan, wan, lossy or thin (--network; default: none)
  TFCLUSTER_CI_BAKE      true: copy the project, if any, into an image instead of mounting it (--bake),
                         as a job whose engine cannot see its folders must (default: false)
  TFCLUSTER_CI_JUNIT     where the verdict goes as JUnit XML (--junit; default: tfcluster-verdict.xml)
  TFCLUSTER_CI_REPORT    where the run's report goes, one HTML page (--report; default: beside
                         the JUnit file, its name with .html; the action and the template give
                         tfcluster-report.html)
  COMPOSE_PROJECT_NAME   the Compose project to run as (the action and the GitLab template set one
                         per job, so that jobs on one engine never share a cluster)
  GITHUB_OUTPUT          if set (GitHub Actions), `status=N` is appended to it

examples:
  scripts/ci-run                                        # the built-in trainer, two workers
  TFCLUSTER_CI_PROJECT=examples/custom-loop TFCLUSTER_CI_WORKERS=3 scripts/ci-run

exit status (scripts/run's):
  0    ok: every worker exited 0, trained with all its peers and agrees
  2    config error: a bad variable, named in one line (nothing was started)
  7    verification failed: the verdict says why
  129, 130, 143  cancelled by SIGHUP, SIGINT or SIGTERM: the cluster was stopped, the report fails
  141  its output's reader went away (`| head`): stopped as on a signal, the report fails
  any other: as scripts/run --help says"""


def arguments_of(environ) -> list[str]:
    """scripts/run's arguments from the TFCLUSTER_CI_* variables; a bad one ends with one line, exit 2."""
    arguments = ["--workers", environ.get("TFCLUSTER_CI_WORKERS") or "2"]
    arguments += ["--junit", environ.get("TFCLUSTER_CI_JUNIT") or "tfcluster-verdict.xml"]
    for variable, option in (
        ("TFCLUSTER_CI_PROJECT", "--project"),
        ("TFCLUSTER_CI_COMMAND", "--command"),
        ("TFCLUSTER_CI_NETWORK", "--network"),
        ("TFCLUSTER_CI_REPORT", "--report"),
    ):
        if environ.get(variable):
            arguments += [option, environ[variable]]
    bake = environ.get("TFCLUSTER_CI_BAKE", "false")
    if bake not in ("true", "false", ""):
        print(f"ci-run: TFCLUSTER_CI_BAKE must be true or false, got {bake!r}", file=sys.stderr)
        sys.exit(2)
    # The built-in trainer is the image's own: there is no project to bake.
    if bake == "true" and environ.get("TFCLUSTER_CI_PROJECT"):
        arguments.append("--bake")
    return arguments


def report(status: int, environ) -> None:
    """The step's output `status`, for GitHub Actions."""
    if environ.get("GITHUB_OUTPUT"):
        with open(environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as output:
            output.write(f"status={status}\n")


def remove_orphans() -> None:
    """What killed jobs left, removed and said; nothing if the engine cannot be asked (the run says why)."""
    try:
        removed = orphans.remove()
    except (OSError, subprocess.SubprocessError):
        return
    for orphan in removed:
        print(f"ci-run: removed {orphan.describe()}", file=sys.stderr, flush=True)


def main(argv: list[str], environ=None) -> int:
    environ = os.environ if environ is None else environ
    Parser("ci-run", prog="scripts/ci-run", description=DESCRIPTION, epilog=EPILOG).parse_args(argv)
    status = 1
    try:
        # The leftovers go once the input is known good: bad input touches nothing.
        status = run.main(arguments_of(environ), environ, first=remove_orphans)
    except KeyboardInterrupt:
        status = 128 + signal.SIGINT
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else 1
    finally:
        report(status, environ)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

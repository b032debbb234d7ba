"""scripts/report: makes a finished run's report.html again from what the run kept in its folder,
or from a finished Compose project's containers (a `docker compose up` by hand).

Every scripts/run writes its report itself (and says where); this is for a run kept from another
machine (a CI artifact's folder), after a change to the page, or for a cluster brought up with
Compose alone. The folder is a run's (.tfcluster/runs/NAME/, or a copy of it) holding record/:
each container's state and timed log. With --project, that record is first taken from the engine
into .tfcluster/runs/NAME/.
"""

import sys
from pathlib import Path

from tfcluster import report
from tfcluster.cluster import runs
from tfcluster.commands.parsing import Parser
from tfcluster.paths import ROOT
from tfcluster.report import engine
from trainer.contract.exitcodes import ExitCode

DESCRIPTION = (
    "Makes a finished run's report.html again from the record the run kept in its folder, or from "
    "a finished Compose project's containers (--project: a `docker compose up` by hand)."
)

EPILOG = """\
examples:
  scripts/report                                  # the default run's folder, again
  scripts/report kept/run -o report.html          # a run's folder kept from a CI job
  scripts/report --project tfcluster              # after `docker compose up` by hand

exit status:
  0    ok: the page written (its path printed)
  1    the page could not be written (a traceback says why)
  2    config error: no record in the folder, no containers of the project, or a file that cannot
       be written (one line says which)"""


def main(argv: list[str]) -> int:
    parser = Parser("report", prog="scripts/report", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument(
        "folder",
        nargs="?",
        help="the run's folder, holding record/ (default: .tfcluster/runs/tfcluster, the default run's; "
        "with --project, .tfcluster/runs/NAME)",
    )
    parser.add_argument(
        "--project",
        metavar="NAME",
        help="first keep the record of the Compose project NAME's containers (running or not) in the "
        "folder, and make the report there",
    )
    parser.add_argument("-o", "--output", help="where to write the page (default: FOLDER/report.html)")
    arguments = parser.parse_args(argv)
    default = runs.folder_of(arguments.project or "tfcluster")
    folder = Path(arguments.folder) if arguments.folder else ROOT / default
    if arguments.project and not engine.containers(arguments.project):
        print(f"report: the Compose project {arguments.project} has no containers here", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    if not arguments.project and not (folder / report.RECORD).is_dir():
        print(f"report: {folder}: no record of a run there (no {report.RECORD}/ folder)", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    try:
        if arguments.project:
            report.keep(folder, arguments.project)
        written = report.write(folder, Path(arguments.output) if arguments.output else None)
    except OSError as error:
        print(f"report: {error}", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    print(written)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

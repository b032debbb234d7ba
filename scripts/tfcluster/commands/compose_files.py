"""Writes the checked-in compose.*.yaml files from their fragments: `python3 scripts/compose_files.py [--check]`.

The files are what `docker compose` reads by hand and what scripts/run adds an N-worker override
to; the fragments are their one source, which the override is written from too (scaling.py).
"""

import sys

from tfcluster.cluster import fragments
from tfcluster.commands.parsing import Parser
from tfcluster.paths import ROOT


def stale() -> list[str]:
    """The checked-in files that differ from what the fragments write, by name."""
    return [
        name
        for name, text in fragments.files().items()
        if not (ROOT / name).is_file() or (ROOT / name).read_text(encoding="utf-8") != text
    ]


def main(argv: list[str]) -> int:
    parser = Parser("compose_files.py", prog="scripts/compose_files.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="only compare: exit 1 if a file is out of date (default: write them)"
    )
    arguments = parser.parse_args(argv)
    if arguments.check:
        names = stale()
        if names:
            print(
                f"compose_files.py: {', '.join(names)} out of date: python3 scripts/compose_files.py",
                file=sys.stderr,
            )
            return 1
        return 0
    for name, text in fragments.files().items():
        (ROOT / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

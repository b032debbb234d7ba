"""`python3 -m tfcluster.images MODULE ARGUMENTS...`: a module's own command line, for a shell or a test.

One entry for all, rather than `python3 -m tfcluster.images.MODULE`: the host package's __init__
imports the layers above this one, and they import some of its modules (tfcluster.project.requirements
imports pins), which runpy would then run a second time as __main__, warning so on stderr.
"""

import sys

from tfcluster.images import digest, pins

MODULES = {"digest": digest.main, "pins": pins.main}


def main(arguments: list[str]) -> int:
    if not arguments or arguments[0] not in MODULES:
        print(f"usage: python3 -m tfcluster.images {{{','.join(MODULES)}}} ARGUMENTS... (-h for each)", file=sys.stderr)
        return 2
    return MODULES[arguments[0]](arguments[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

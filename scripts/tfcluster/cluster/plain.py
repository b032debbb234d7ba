"""Compose's output as plain text where it is not a terminal (a file, a pipe, a CI log).

Compose colours its lines and redraws its progress even there: `--ansi never` removes most of it,
but Compose 2.40 still writes `\\r\\x1b[K` before a container's `exited with code` line and colours
`Aborting on container exit...` red whatever it is told. So a run that does not write to a
terminal passes Compose's output through here, each line without its escape sequences and
carriage returns; on a terminal Compose's own output is left as it is.
"""

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator
from typing import BinaryIO

from tfcluster.cluster import cancel

# CSI sequences (colours, erase line, cursor moves), OSC sequences (titles), and the bare carriage
# return with which a progress line is redrawn.
_ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\r(?!\n)")


def strip(line: bytes) -> bytes:
    return _ESCAPES.sub(b"", line)


def _copy(source: int, target: BinaryIO) -> None:
    target = cancel.Outliving(target)  # `scripts/run | head`: read on, or Compose would block.
    with os.fdopen(source, "rb") as lines:
        for line in lines:
            target.write(strip(line))
            target.flush()


@contextlib.contextmanager
def streams() -> Iterator[dict]:
    """The `stdout` and `stderr` options for a child whose output should be plain text here: none
    on a terminal; else pipes whose every line is copied, stripped, to this process's own."""
    if sys.stdout.isatty():
        yield {}
        return
    options, copiers = {}, []
    for name, target in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        target.flush()
        read, write = os.pipe()
        copier = threading.Thread(target=_copy, args=(read, target.buffer), daemon=True)
        copier.start()
        options[name] = write
        copiers.append(copier)
    try:
        yield options
    finally:
        # The child has ended, or was stopped: each copier reads to the end once both are closed;
        # the second is closed even if the run is cancelled as the first is (its reader gone, say).
        try:
            os.close(options["stdout"])
        finally:
            os.close(options["stderr"])
        for copier in copiers:
            copier.join(timeout=10)

"""The start gate: this project's own programs import TensorFlow while the workers still meet.

Importing TensorFlow takes seconds; the rendezvous (trainer/launcher/supervisor.py) a fraction of one. So
the launcher starts a program that honours the gate at once, with the read end of a pipe named by
TFCLUSTER_GATE_FD, and the program waits there, TensorFlow imported, until the launcher writes
`go` (every worker agreed). If the launcher closes the pipe instead, the program ends without
touching the cluster. A program that knows nothing of the gate is started only after the
rendezvous, so a mismatch or a missing peer never reaches its TensorFlow either way.
"""

import os
from collections.abc import Mapping

VARIABLE = "TFCLUSTER_GATE_FD"
GO = b"go\n"


def wait_for_go(environ: Mapping[str, str] = os.environ) -> bool:
    """True once the launcher says go (at once without a gate); False if it closed the gate."""
    descriptor = environ.get(VARIABLE)
    if not descriptor:
        return True
    with os.fdopen(int(descriptor), "rb") as gate:
        return gate.readline() == GO

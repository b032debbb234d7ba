"""Any Python program in the image writes every thread's stack to its stderr on SIGUSR1, when its launcher asks.

The launcher of a stalled cluster (trainer/launcher/watchdog.py) wants to show where each program
was waiting, without stopping it first, whatever program it is: this project's or a user's own.
So the image loads this file into every Python interpreter it starts, as `_tfcluster_stacks` by a
.pth file in its site-packages (docker/Dockerfile): Python's `site` runs a .pth file's `import`
lines at start-up. It does something only where the launcher set `VARIABLE` in the program's
environment, so nothing else in the image (the launcher itself, the verifier) changes, and it
imports nothing of this project's: a user's own package named `trainer` stays theirs.

A program that sets its own SIGUSR1 handler replaces this one, and then has no stack dumped; the
launcher sends the signal only to processes that handle it (trainer/launcher/activity.py).
"""

import faulthandler
import os
import signal

SIGNAL = signal.SIGUSR1
VARIABLE = "TFCLUSTER_STACK_DUMPS"


def install(environ=os.environ) -> bool:
    """Registers the dump on SIGNAL if the launcher asked for it; returns whether it did."""
    if environ.get(VARIABLE) != "1":
        return False
    # chain=False: the signal's default action would end the program, which must go on running.
    faulthandler.register(SIGNAL, all_threads=True, chain=False)
    return True


if __name__ == "_tfcluster_stacks":  # Loaded by the image's .pth file, not imported as trainer.contract.stacks.
    install()

"""The faults a test injects into the trainer on purpose, to rehearse the recovery path (docs/recovery.md).

The other one, a delay before each checkpoint's commit, belongs to the store
(trainer/training/checkpoints.py); this one is a step callback of the training loop, installed by
the entry point only when asked for, so that the loop itself knows of no fault.
"""

import os
from collections.abc import Callable


def exit_after(step: int, say: Callable[[str], None]) -> Callable[[int], None]:
    """A step callback that ends the process with 1 once `step` steps are done (TFCLUSTER_FAULT_EXIT_AT_STEP)."""

    def on_step(done: int) -> None:
        if done == step:
            say(f"fault | exiting 1 after step {done}, as TFCLUSTER_FAULT_EXIT_AT_STEP asks")
            os._exit(1)  # A crash: no cleanup, no goodbye to the peers.

    return on_step

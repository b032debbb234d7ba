"""The faults a test injects into the trainer on purpose: a crash, to rehearse the recovery path
(docs/recovery.md), and a hang, to rehearse the stall watchdog (docs/failures.md, "Stalls").

The other one, a delay before each checkpoint's commit, belongs to the store
(trainer/training/checkpoints.py); these are step callbacks of the training loop, installed by
the entry point only when asked for, so that the loop itself knows of no fault.
"""

import os
import threading
from collections.abc import Callable


def exit_after(step: int, say: Callable[[str], None]) -> Callable[[int], None]:
    """A step callback that ends the process with 1 once `step` steps are done (TFCLUSTER_FAULT_EXIT_AT_STEP)."""

    def on_step(done: int) -> None:
        if done == step:
            say(f"fault | exiting 1 after step {done}, as TFCLUSTER_FAULT_EXIT_AT_STEP asks")
            os._exit(1)  # A crash: no cleanup, no goodbye to the peers.

    return on_step


def hang_after(step: int, say: Callable[[str], None]) -> Callable[[int], None]:
    """A step callback that stops calling collectives once `step` steps are done (TFCLUSTER_FAULT_HANG_AT_STEP).

    It waits on something of its own that never comes, as a program blocked on a queue or a lock
    would: its peers wait in the next step's all-reduce, and nothing fails.
    """

    def on_step(done: int) -> None:
        if done == step:
            say(f"fault | waiting forever after step {done}, as TFCLUSTER_FAULT_HANG_AT_STEP asks")
            threading.Event().wait()

    return on_step


def step_faults(*, exit_at: int, hang_at: int, say: Callable[[str], None]) -> Callable[[int], None] | None:
    """The step callback of every fault asked for (0: none), in this order; None when none is."""
    asked = [make(step, say) for step, make in ((exit_at, exit_after), (hang_at, hang_after)) if step]
    if not asked:
        return None

    def on_step(done: int) -> None:
        for fault in asked:
            fault(done)

    return on_step

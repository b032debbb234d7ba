"""Phase 0, with compose.network.yaml only: wait until this worker's shaper has measured the network.

What the shaper writes and how it is read is the contract's (trainer/contract/shaping.py); here is
only the launcher's wait for it, bounded by the join deadline, and its verdict on what it reads.
"""

import time
from collections.abc import Callable

from trainer.contract import shaping
from trainer.launcher.failures import ShapingMissed
from trainer.launcher.stopping import StopRequest

# How often the results directory is looked at: the report appears there once, whole, by a rename.
POLL_INTERVAL = 0.05


def wait_for_shaping(
    *,
    results_dir: str,
    host: str,
    run_id: str | None,
    join_timeout: float,
    stop: StopRequest,
    say: Callable[[str], None],
) -> None:
    """Returns once the shaper reports its profile applied as asked; ShapingMissed if it does not."""
    deadline = time.monotonic() + join_timeout
    say("waiting for this worker's network shaper")
    while (report := shaping.read_report(results_dir, host, run_id)) is None:
        if time.monotonic() >= deadline:
            raise ShapingMissed(
                f"no network measurements from this worker's shaper within the {join_timeout:.0f}s join "
                f"deadline (is compose.network.yaml's shaper running? its log says why)"
            )
        stop.pause(POLL_INTERVAL)
    say(shaping.summary(report))
    if not report.get("ok"):
        missed = "; ".join(check["check"] for check in report.get("checks", []) if not check["ok"])
        raise ShapingMissed(f"the network shaping misses its profile: {missed}")

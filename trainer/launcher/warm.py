"""What a warm worker's launcher clears before its run: the earlier runs' results and checkpoints.

A warm cluster's volumes outlive its runs, so `scripts/run --warm` gives every run folders of its
own, `runs/RUN` under each volume (TF_RESULTS_DIR, TF_CHECKPOINT_DIR). A run must never resume
from an earlier run's checkpoints, and the results volume is a small tmpfs: each launcher removes
its volumes' other run folders first. Runs of one warm cluster never overlap (the host holds its
lock for the run), so no other run's folder is in use.
"""

import contextlib
import shutil
from pathlib import Path

RUNS = "runs"


def clear_earlier_runs(*folders: str) -> None:
    for folder in folders:
        path = Path(folder) if folder else None
        if path is None or path.parent.name != RUNS:
            continue  # Not a run's own folder: nothing of it is another run's.
        with contextlib.suppress(FileNotFoundError):
            for earlier in path.parent.iterdir():
                if earlier.name != path.name:
                    shutil.rmtree(earlier, ignore_errors=True)

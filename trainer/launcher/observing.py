"""The observer's record of one run of the program: a file made for it, and copied into the log after.

The launcher names a fresh, empty file in the program's environment (trainer/contract/observing.py);
the observer in the program appends its records to it (trainer/observer/); once the program has
ended, its output drained, the launcher prints the records, so that they are in the worker's log
in the results directory and in `docker logs` alike, where the verifier reads them
(trainer/verifier/observed.py). The file lives in the worker's own /tmp, never in the shared
results volume, and is removed once copied.
"""

import contextlib
import os
import tempfile

from trainer.contract import observing


class ObservedRecord:
    def __init__(self):
        descriptor, self.path = tempfile.mkstemp(prefix="tfcluster-observed-", suffix=".jsonl")
        os.close(descriptor)

    def variables(self) -> dict[str, str]:
        return {observing.VARIABLE: self.path}

    def copy(self, show) -> None:
        """Each record through `show` (one line each), then the file is gone; nothing, if it is already."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as records:
                for line in records:
                    show(line if line.endswith("\n") else line + "\n")
        except FileNotFoundError:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

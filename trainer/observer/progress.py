"""The training's progress, kept in a small file for whoever times something by it.

A shaper's faults are timed by training progress (trainer/contract/faults.py: `at step N`, `at
epoch N`, `at Ts` after the first step). The observer counts the steps as their training input
is delivered to them (trainer/observer/data.py: in the traced step, or taken eagerly from the
iterator by a loop that then steps, once it has applied gradients) and Keras's epoch ends, and rewrites the file the
launcher named (`VARIABLE`), whole by a rename, at most every `INTERVAL` seconds and at each
epoch's end: a schedule may run up to that late. Without a distributed dataset no step is seen
(only the epochs of `fit`). It never raises: a full results volume costs the schedule, never the
training.
"""

import json
import os
import threading
import time

VARIABLE = "TFCLUSTER_PROGRESS"
INTERVAL = 0.05  # A file of some 80 bytes on the results tmpfs, written by a rename.


class Progress:
    def __init__(self, path: str | None):
        self._path = path
        self._lock = threading.Lock()
        self._steps = 0
        self._epochs = 0
        self._epoch_step = 0  # The steps taken when the last epoch ended.
        self._first_step: float | None = None  # Wall time, as other containers' clocks read it.
        self._written = 0.0
        self._write()

    def stepped(self) -> None:
        """A training step took its input."""
        with self._lock:
            self._steps += 1
            if self._first_step is None:
                self._first_step = time.time()
                self._write()
            elif time.monotonic() - self._written >= INTERVAL:
                self._write()

    def epoch_ended(self) -> None:
        with self._lock:
            self._epochs += 1
            self._epoch_step = self._steps
            self._write()

    def _write(self) -> None:
        if not self._path:
            return
        self._written = time.monotonic()
        record = {
            "steps": self._steps,
            "epochs": self._epochs,
            "epoch_step": self._epoch_step,
            "first_step": self._first_step,
            "time": time.time(),
        }
        temporary = f"{self._path}.tmp"
        try:
            with open(temporary, "w", encoding="utf-8") as file:
                json.dump(record, file)
            os.replace(temporary, self._path)
        except OSError:
            return

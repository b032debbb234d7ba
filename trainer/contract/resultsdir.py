"""The results directory: how a worker's launcher tells the verifier what happened to it.

For each worker `NAME` the launcher keeps three files in a directory shared with the verifier:

- `NAME.lock`: locked (flock) by the launcher for as long as it lives. The kernel releases the
  lock however the launcher ends, SIGKILL and OOM included, so the verifier waits on the lock
  itself (an event, not a poll) and can tell a worker that exited from one that was killed.
- `NAME.status`: JSON, replaced atomically: `{"state": "running"}`, then
  `{"state": "exited", "exit_code": N}` written before the lock is released.
- `NAME.log`: everything the worker's program printed, appended to: a worker restarted by the
  keeper (trainer/keeper/keeper.py) adds to its earlier runs' lines instead of erasing them.

The keeper keeps the same three files under its own name, and adds what it did to its status.
"""

import dataclasses
import fcntl
import json
import os
import threading
import time
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class WorkerFiles:
    directory: Path
    name: str

    @property
    def lock(self) -> Path:
        return self.directory / f"{self.name}.lock"

    @property
    def status(self) -> Path:
        return self.directory / f"{self.name}.status"

    @property
    def log(self) -> Path:
        return self.directory / f"{self.name}.log"


class Recorder:
    """The launcher's side: hold the lock, write the status, append the log."""

    def __init__(self, files: WorkerFiles, **published):
        self._files = files
        files.directory.mkdir(parents=True, exist_ok=True)
        self._lock = open(files.lock, "a")  # noqa: SIM115 - held open for the process's lifetime.
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self._log = open(files.log, "a", encoding="utf-8")  # noqa: SIM115 - closed in finish().
        self._write_status({"state": "running", "pid": os.getpid(), **published})

    def log_line(self, line: str) -> None:
        self._log.write(line)
        self._log.flush()

    def finish(self, exit_code: int, **details) -> None:
        self._log.close()
        self._write_status({"state": "exited", "exit_code": exit_code, **details})
        # The lock goes with the process; releasing it here only makes the verdict a little sooner.
        fcntl.flock(self._lock, fcntl.LOCK_UN)

    def _write_status(self, status: dict) -> None:
        temporary = self._files.status.with_suffix(".status.tmp")
        temporary.write_text(json.dumps(status), encoding="utf-8")
        os.replace(temporary, self._files.status)


@dataclasses.dataclass(frozen=True)
class WorkerRecord:
    """What the verifier learned about one worker from the results directory."""

    name: str
    state: str  # "missing", "running", "exited" or "killed"
    exit_code: int | None
    log: str
    details: dict = dataclasses.field(default_factory=dict)  # What else its status said.


def wait_for_exit(files: WorkerFiles, deadline: float, clock, *, start_deadline: float | None = None) -> WorkerRecord:
    """Waits until the worker's launcher has started (by `start_deadline`) and ended (by `deadline`)."""
    start_deadline = deadline if start_deadline is None else min(start_deadline, deadline)
    while not files.status.exists():
        if clock() >= start_deadline:
            return WorkerRecord(files.name, "missing", None, "")
        time.sleep(0.1)  # Before the worker has created its files there is no event to wait on.
    if not _wait_for_unlock(files.lock, deadline - clock()):
        return WorkerRecord(files.name, "running", None, _read(files.log))
    status = json.loads(_read(files.status) or "{}")
    log = _read(files.log)
    if status.get("state") == "exited":
        details = {key: value for key, value in status.items() if key not in ("state", "exit_code")}
        return WorkerRecord(files.name, "exited", int(status["exit_code"]), log, details)
    return WorkerRecord(files.name, "killed", None, log)


def recorded_exit_code(files: WorkerFiles, *, written_since: float = 0.0) -> int | None:
    """The exit code a worker's launcher recorded in its status, if it says the worker exited; else None.

    A status last written before `written_since` (wall-clock seconds) is an earlier run's, and so
    says nothing of this one: None too. So does a status that is missing or cannot be read.
    """
    try:
        if files.status.stat().st_mtime < written_since:
            return None
        status = json.loads(files.status.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(status, dict) or status.get("state") != "exited":
        return None
    exit_code = status.get("exit_code")
    return exit_code if isinstance(exit_code, int) else None


def _wait_for_unlock(path: Path, timeout: float) -> bool:
    """Blocks on a shared flock in a thread, so the wait ends the moment the launcher's lock goes."""
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return True  # Already ended: no need to wait, even with no time left.
        except BlockingIOError:
            pass
    acquired = threading.Event()

    def take_lock():
        with open(path) as handle:
            fcntl.flock(handle, fcntl.LOCK_SH)
            acquired.set()

    threading.Thread(target=take_lock, daemon=True).start()
    return acquired.wait(max(0.0, timeout))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""

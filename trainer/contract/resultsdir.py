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

The volume is small (compose.yaml's `results`, a tmpfs of TF_RESULTS_SIZE, 64m by default) and
shared by every worker's log, so a chatty program can fill it. A full volume must not end the
launcher, its log forwarder or its watchdog in a traceback, nor leave the verifier without a
status: the recorder keeps a little space of its own (`NAME.reserve`), stops appending to the log
at the first write that fails, tells its owner once (`on_full`), and gives the reserve back just
before it writes the final status, which then fits.
"""

import contextlib
import dataclasses
import fcntl
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from trainer.contract import space

# What the recorder keeps aside for its final status (a page or two of JSON at most).
RESERVE_BYTES = 64 * 1024


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

    @property
    def reserve(self) -> Path:
        return self.directory / f"{self.name}.reserve"

    @property
    def progress(self) -> Path:
        """The training's progress, as the observer in the program keeps it (trainer/observer/progress.py)."""
        return self.directory / f"{self.name}.progress"


def volume_size(directory: Path) -> int | None:
    """The size in bytes of the file system `directory` is on, if it can be told."""
    try:
        info = os.statvfs(directory)
    except OSError:
        return None
    return info.f_blocks * info.f_frsize


class Recorder:
    """The launcher's side: hold the lock, write the status, append the log.

    `on_full(error)` is called once, from whichever thread's line found the volume full (or
    otherwise unwritable); the log is not appended to from then on.
    """

    def __init__(self, files: WorkerFiles, *, on_full: Callable[[OSError], None] | None = None, **published):
        self._files = files
        self.on_full = on_full
        # The first write that failed, once one has: the log stops there, after `written` characters.
        self.full: OSError | None = None
        self.written = 0
        self._guard = threading.Lock()
        files.directory.mkdir(parents=True, exist_ok=True)
        # Group-writable, as the volume's root is (compose.yaml): a warm run's own folder is made
        # here, and the shapers and the keeper write beside the workers as root without the
        # capability to write where the mode says no, in the workers' group.
        with contextlib.suppress(OSError):  # Not this process's folder (the volume's root): as it is.
            files.directory.chmod(0o770)
        # An earlier run's status and progress go before the lock is taken: whoever sees the lock
        # held (`live_status`) then finds this run's status, or none yet, never the last one's.
        for earlier in (files.status, files.progress):
            earlier.unlink(missing_ok=True)
        self._lock = open(files.lock, "a")  # noqa: SIM115 - held open for the process's lifetime.
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self._keep_reserve()
        self._log = open(files.log, "a", encoding="utf-8")  # noqa: SIM115 - closed in finish().
        self._write_status({"state": "running", "pid": os.getpid(), **published})

    @property
    def directory(self) -> Path:
        return self._files.directory

    @property
    def progress(self) -> Path:
        return self._files.progress

    def log_line(self, line: str) -> None:
        with self._guard:
            if self.full is not None:
                return
            try:
                self._log.write(line)
                self._log.flush()
            except OSError as error:
                self.full = error
            else:
                self.written += len(line)
                return
        if self.on_full is not None:
            self.on_full(self.full)

    def finish(self, exit_code: int, **details) -> None:
        with self._guard:
            try:
                self._log.close()
            except OSError as error:  # What was still buffered did not fit.
                self.full = self.full or error
            # The room kept for this, given back just before it is needed.
            self._files.reserve.unlink(missing_ok=True)
            if self.full is not None:
                details = {"volume_full": _why(self.full), **details}
            # Should not even that fit, the verifier finds the lock gone and no final status (killed).
            with contextlib.suppress(OSError):
                self._write_status({"state": "exited", "exit_code": exit_code, **details})
        # The lock goes with the process; releasing it here only makes the verdict a little sooner.
        fcntl.flock(self._lock, fcntl.LOCK_UN)

    def _keep_reserve(self) -> None:
        """Room for the final status, however full the volume gets meanwhile (a tmpfs allocates on write)."""
        try:
            with open(self._files.reserve, "wb") as reserve:
                reserve.write(b"\0" * RESERVE_BYTES)
        except OSError:
            self._files.reserve.unlink(missing_ok=True)  # Full already: the log's first line will say so.

    def _write_status(self, status: dict) -> None:
        temporary = self._files.status.with_suffix(".status.tmp")
        temporary.write_text(json.dumps(status), encoding="utf-8")
        os.replace(temporary, self._files.status)


def _why(error: OSError) -> str:
    return "no space left" if space.out_of_room(error) else (error.strerror or str(error))


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


def live_status(files: WorkerFiles) -> dict | None:
    """The running status of a launcher alive now, or None: none yet, or an ended run's.

    The lock first: a launcher removes an earlier run's status before it takes the lock, so a status
    read after the lock was seen held is that launcher's (a worker restarted by the keeper leaves
    its killed run's `running` status behind, with its lock released)."""
    try:
        with open(files.lock) as handle:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return None  # Nobody holds it: no launcher is alive.
    except BlockingIOError:
        pass
    except FileNotFoundError:
        return None
    try:
        status = json.loads(files.status.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return status if status.get("state") == "running" else None


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

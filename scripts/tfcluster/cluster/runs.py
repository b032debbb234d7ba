"""Which Compose project, and which folder of generated files, a run is: its own, for as long as it runs.

Every run of a checkout used to write the same files and run as the same Compose project, so a
second run's `down` ended the first. Now a run claims a slot before it writes anything: a folder,
.tfcluster/runs/SLOT/, with its generated Compose files and env file, and a lock held (flock) for
the run's lifetime, which the kernel releases however the run ends. The slot is the Compose
project's name. The default is the one `docker compose` by hand uses (COMPOSE_PROJECT_NAME, else
compose.yaml's name: tfcluster), so that `docker compose logs` finds a run's containers; when
another run of this checkout holds it, or another checkout's containers carry that project name
(Compose project names are the engine's, not a folder's), the run takes NAME-2, NAME-3, ... and
says so. A name asked for (scripts/run --name, Cluster(name=)) is taken as it is or refused,
never changed: whoever named it may be about to use it by hand.

A run also holds a record of its name on this host, outside any checkout (CLAIMS: a CI runner
deletes the action's folder, and a job clones the harness afresh, between jobs), which says as one
JSON line which process claimed the name, from which folder, when, and (once the run has ended,
however it ended) when it ended. A run killed outright cannot say so, and its record, whose lock
the kernel released, then marks a cluster nobody will take down (tfcluster/cluster/orphans.py).
Held, it also keeps two checkouts of this host from running as one name at once. Where CLAIMS
cannot be written (another user's, a read-only /tmp), a run goes on without one.
"""

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tfcluster.errors import Refusal

RUNS = ".tfcluster/runs"
# Enough for every run a 2-core machine can hold at once, and a bound on the search.
MOST_SLOTS = 32
LOCK = "lock"
# Each name's record on this host: one folder for every user and checkout (sticky, as /tmp is);
# TFCLUSTER_CLAIMS moves it (the unit tests' runs keep theirs apart from real ones).
CLAIMS = Path(os.environ.get("TFCLUSTER_CLAIMS") or "/tmp/tfcluster-claims")


def folder_of(slot: str) -> str:
    """The run's folder of generated files, from the checkout's root."""
    return f"{RUNS}/{slot}"


@dataclass
class Claim:
    """A slot held: its name (the Compose project's) and the open lock that holds it."""

    slot: str
    lock: IO[str]
    record: IO[str] | None = None  # The name's record on this host, held (None where none could be).

    def release(self) -> None:
        """The run has ended: its record says so, then the locks are let go."""
        if self.record is not None:
            with contextlib.suppress(OSError, ValueError):
                mark(self.record, {**record_of(Path(self.record.name)), "ended": round(time.time(), 3)})
            self.record.close()
        self.lock.close()


def foreign_checkouts(name: str, root: Path) -> list[str]:
    """The other folders whose Compose runs have containers (running or not) under project `name`."""
    listed = subprocess.run(
        [
            "docker",
            "ps",
            "--all",
            "--filter",
            f"label=com.docker.compose.project={name}",
            "--format",
            '{{.Label "com.docker.compose.project.working_dir"}}',
        ],
        capture_output=True,
        text=True,
    )
    found = {line.strip() for line in listed.stdout.splitlines() if line.strip()}
    return sorted(folder for folder in found if not _same_folder(folder, root))


def _same_folder(folder: str, root: Path) -> bool:
    """Whether Compose's working folder is this root, by path or, where it is there, by the file
    itself (a symlink, or a mount of it at another path)."""
    if os.path.realpath(folder) == os.path.realpath(root):
        return True
    try:
        return os.path.samefile(folder, root)
    except OSError:
        return False


def claim(
    root: Path,
    name: str,
    *,
    given: bool,
    foreign: Callable[[str, Path], list[str]] | None = None,
) -> Claim:
    """The first free slot from `name` (only `name` itself if it was `given`); raises Refusal."""
    foreign = foreign or foreign_checkouts
    candidates = [name] if given else [name, *(f"{name}-{number}" for number in range(2, MOST_SLOTS + 1))]
    held = []
    for slot in candidates:
        lock = hold(root / folder_of(slot) / LOCK)
        if lock is None:
            held.append(slot)
            continue
        others = foreign(slot, root)
        record = None if others else _record(slot, root)
        if record is False:  # A live run of another checkout (or copy) on this host holds the name.
            lock.close()
            if given:
                raise Refusal(
                    f"a run from another checkout on this host is running as the Compose project {slot!r}: give "
                    "this run another name, or wait for that one to end"
                )
            held.append(slot)
            continue
        if not others:
            return Claim(slot, lock, record)
        lock.close()
        if given:
            raise Refusal(
                f"the Compose project {slot!r} has containers of another checkout ({others[0]}): give this run another "
                f"name, or take those down there (docker compose -p {slot} down)"
            )
    if given:
        raise Refusal(
            f"another run of this checkout is running as the Compose project {name!r}: give this run another name, "
            "or wait for that one to end"
        )
    raise Refusal(
        f"{len(held)} runs of this checkout are running at once ({held[0]} to {held[-1]}): wait for one to end"
    )


def held(root: Path, slot: str) -> bool:
    """Whether a live run holds the slot."""
    lock_path = root / folder_of(slot) / LOCK
    if not lock_path.exists():
        return False
    lock = hold(lock_path)
    if lock is None:
        return True
    lock.close()
    return False


def remove_folder(root: Path, slot: str) -> bool:
    """The slot's folder emptied of all but its lock, unless a live run holds it; whether it is."""
    folder = root / folder_of(slot)
    if not folder.is_dir():
        return True
    lock = hold(folder / LOCK)
    if lock is None:
        return False
    try:
        # Everything but the lock file itself: a run claiming the slot now may have opened it, and
        # would lock a file no longer there, which the next claimer would make again.
        for entry in folder.iterdir():
            if entry.name == LOCK:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    finally:
        lock.close()
    return [entry.name for entry in folder.iterdir()] == [LOCK]


def record_path(name: str) -> Path:
    """Where the Compose project `name`'s record is on this host."""
    return CLAIMS / f"{name}.lock"


def _record(name: str, root: Path) -> IO[str] | None | bool:
    """The name's record on this host, held and written; False if a live run holds it; None if it
    cannot be had here."""
    try:
        fresh = not CLAIMS.is_dir()
        CLAIMS.mkdir(parents=True, exist_ok=True)
        if fresh:
            CLAIMS.chmod(0o1777)  # Every user's runs keep their records here.
        record = hold(record_path(name))
        if record is None:
            return False
        with contextlib.suppress(OSError):
            os.chmod(record.name, 0o666)  # Another user's next job may judge it.
        mark(record, {"pid": os.getpid(), "since": round(time.time(), 3), "root": str(root)})
        return record
    except OSError:
        return None


def hold(path: Path) -> IO[str] | None:
    """The lock file, open and locked by this process (its record unchanged); None if another
    process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held open for the run's lifetime.
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def record_of(path: Path) -> dict:
    """What the lock file says: `pid` and `since` (the claim's time), `ended` once the run ended;
    empty for a file of an earlier version (its pid alone) or none."""
    try:
        record = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def mark(lock: IO[str], record: dict) -> None:
    """The lock file's record replaced, by whoever holds it."""
    lock.truncate(0)
    lock.write(json.dumps(record) + "\n")
    lock.flush()

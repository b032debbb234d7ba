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

The lock file also says, as one JSON line, which process claimed the slot, when, and (once the run
has ended, however it ended) when it ended: a run killed outright cannot say so, and its lock,
released by the kernel, then marks a cluster nobody will take down (tfcluster/cluster/orphans.py).
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


def folder_of(slot: str) -> str:
    """The run's folder of generated files, from the checkout's root."""
    return f"{RUNS}/{slot}"


@dataclass
class Claim:
    """A slot held: its name (the Compose project's) and the open lock that holds it."""

    slot: str
    lock: IO[str]

    def release(self) -> None:
        """The run has ended: its lock file says so, then the lock is let go."""
        with contextlib.suppress(OSError, ValueError):
            mark(self.lock, {**record_of(Path(self.lock.name)), "ended": round(time.time(), 3)})
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
    here = os.path.realpath(root)
    found = {line.strip() for line in listed.stdout.splitlines() if line.strip()}
    return sorted(folder for folder in found if os.path.realpath(folder) != here)


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
        if not others:
            with contextlib.suppress(OSError):
                mark(lock, {"pid": os.getpid(), "since": round(time.time(), 3)})
            return Claim(slot, lock)
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

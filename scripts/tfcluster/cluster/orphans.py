"""Clusters whose run was killed outright, found and removed when the next CI job starts.

A run that ends, however it ends (its verdict, a refusal, a signal it could handle), stops or
takes down its cluster and marks its name's record on this host ended (tfcluster/cluster/runs.py). A run
killed outright (SIGKILL: a runner that died or was replaced, a cancellation whose budget ran out)
cannot: its cluster trains on, sharing the CPUs with the next job, and nothing would remove it.
The kernel has released its record's lock; the record still says when the run began, never that it ended.

So an orphan is a Compose project whose record on this host (runs.CLAIMS, outside any checkout:
a CI runner deletes the action's folder between jobs) is not held by any process, says its run
began and never ended, and whose every container was made after the run began. Nothing else is
touched: a live run's cluster (its record is held), a warm cluster, one brought up by hand or by
an earlier version (no such record), another machine's or another job container's (its /tmp is
not this one). The record is held while its cluster is removed, so no run can claim the name
meanwhile, and marked ended after.
"""

import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tfcluster.cluster import runs
from tfcluster.report import engine

PROJECT_LABEL = engine.PROJECT_LABEL
FOLDER_LABEL = "com.docker.compose.project.working_dir"
# What Compose takes for a project's name: anything else is not a file name to look up.
NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


@dataclass(frozen=True)
class Orphan:
    project: str
    folder: str  # The checkout (or harness copy) the run was started from.
    pid: int | None  # The run's process, as its record says; gone.
    since: float  # When the run claimed the name.
    containers: tuple[str, ...]

    def describe(self) -> str:
        return (
            f"the Compose project {self.project} of a run that was killed (pid {self.pid}, started "
            f"{time.strftime('%H:%M:%S', time.localtime(self.since))}, from {self.folder}): "
            f"{len(self.containers)} container(s), its network and volumes"
        )


def remove() -> list[Orphan]:
    """Every orphan on this engine, removed; what was removed."""
    removed = []
    for project, folder, containers in _projects():
        path = runs.record_path(project)
        if not NAME.fullmatch(project) or not path.is_file():
            continue
        try:
            orphan = _judged(project, folder, containers, path)
        except (OSError, subprocess.SubprocessError):
            continue  # Not this one (another user's record, an engine that timed out): the others still.
        if orphan is not None:
            removed.append(orphan)
    return removed


def _judged(project: str, folder: str, containers: dict[str, float | None], path: Path) -> Orphan | None:
    """The project removed if its record says its run was killed; the orphan it was, or None."""
    lock = runs.hold(path)
    if lock is None:  # A live run's.
        return None
    try:
        record = runs.record_of(path)  # Read once held: a run may have ended meanwhile.
        since = record.get("since")
        if not isinstance(since, (int, float)) or "ended" in record:
            return None
        if any(created is None or created < since for created in containers.values()):
            return None  # Not all its own: made before it began.
        _remove_project(project, list(containers))
        runs.mark(lock, {**record, "ended": round(time.time(), 3), "removed": "orphaned"})
        return Orphan(project, record.get("root") or folder, record.get("pid"), since, tuple(containers))
    finally:
        lock.close()


def _projects() -> list[tuple[str, str, dict[str, float | None]]]:
    """Each Compose project on the engine, with its working folder and its containers' creation times."""
    projects: dict[tuple[str, str], dict[str, float | None]] = {}
    for entry in engine.inspected(PROJECT_LABEL):
        labels = entry.get("Config", {}).get("Labels") or {}
        key = (labels.get(PROJECT_LABEL, ""), labels.get(FOLDER_LABEL, ""))
        if all(key):
            projects.setdefault(key, {})[entry["Id"]] = engine.moment(entry.get("Created", ""))
    return [(project, folder, containers) for (project, folder), containers in sorted(projects.items())]


def _remove_project(project: str, containers: list[str]) -> None:
    """Its containers (killed: nothing of theirs is wanted), then its networks and volumes."""
    _docker("rm", "--force", "--volumes", *containers)
    for kind in ("network", "volume"):
        ids = engine.listed(kind, project)
        if ids:
            _docker(kind, "rm", *ids)


def _docker(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *arguments], capture_output=True, text=True, timeout=120, check=False)

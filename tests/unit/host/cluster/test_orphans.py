"""Clusters whose run was killed outright (tfcluster/cluster/orphans.py): removed when, and only
when, their lock file says their run began and never ended, no process holds it, and every
container is the run's own. The engine is a stand-in; the lock files are real."""

import json
import subprocess
import sys

import pytest
from tfcluster.cluster import orphans, runs
from tfcluster.report.evidence import stamp

SINCE = 1_765_000_000.0


class Engine:
    """`docker` as the orphans module calls it: one project's containers, and every call kept."""

    def __init__(self, folder, project="tfc-1-1-train", created=SINCE + 5):
        self.calls = []
        labels = {orphans.PROJECT_LABEL: project, orphans.FOLDER_LABEL: str(folder)}
        self.containers = [
            {"Id": f"c{number}", "Created": stamp(created), "Config": {"Labels": labels}} for number in range(3)
        ]

    def inspected(self, label):
        self.calls.append(("inspect", label))
        return self.containers

    def listed(self, kind, project):
        # A network or volume of the project's when listed.
        self.calls.append(("listed", kind, project))
        return [f"{kind}-of-the-project"]

    def __call__(self, *arguments):
        self.calls.append(arguments)
        return subprocess.CompletedProcess(["docker", *arguments], 0, stdout="", stderr="")

    def removed(self):
        return [call for call in self.calls if "rm" in call[:2]]


def lock_of(_folder, record, project="tfc-1-1-train"):
    path = runs.record_path(project)  # In the tests' own CLAIMS (tests/unit/host/conftest.py).
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record) + "\n" if isinstance(record, dict) else record)
    return path


def test_a_killed_runs_cluster_is_removed_and_its_lock_marked_ended(tmp_path, monkeypatch):
    path = lock_of(tmp_path, {"pid": 4242, "since": SINCE})
    engine = Engine(tmp_path)
    monkeypatch.setattr(orphans, "_docker", engine)
    monkeypatch.setattr(orphans.engine, "inspected", engine.inspected)
    monkeypatch.setattr(orphans.engine, "listed", engine.listed)
    [orphan] = orphans.remove()
    assert (orphan.project, orphan.pid, orphan.containers) == ("tfc-1-1-train", 4242, ("c0", "c1", "c2"))
    assert "the Compose project tfc-1-1-train of a run that was killed (pid 4242" in orphan.describe()
    assert engine.removed() == [
        ("rm", "--force", "--volumes", "c0", "c1", "c2"),
        ("network", "rm", "network-of-the-project"),
        ("volume", "rm", "volume-of-the-project"),
    ]
    assert runs.record_of(path)["removed"] == "orphaned" and "ended" in runs.record_of(path)
    # Found once: the next job's start finds nothing more.
    assert orphans.remove() == []


@pytest.mark.parametrize(
    ("record", "created", "why"),
    [
        ({"pid": 4242, "since": SINCE, "ended": SINCE + 60}, SINCE + 5, "its run ended: stopped, kept for its logs"),
        ("4242\n", SINCE + 5, "an earlier version's lock: nothing says the run began"),
        ({"pid": 4242, "since": SINCE}, SINCE - 5, "a container made before the run began: not all its own"),
        (None, SINCE + 5, "no record: brought up by hand, or another machine's or job container's"),
    ],
)
def test_a_cluster_is_left_alone_unless_everything_says_its_run_was_killed(tmp_path, monkeypatch, record, created, why):
    if record is not None:
        lock_of(tmp_path, record)
    engine = Engine(tmp_path, created=created)
    monkeypatch.setattr(orphans, "_docker", engine)
    monkeypatch.setattr(orphans.engine, "inspected", engine.inspected)
    monkeypatch.setattr(orphans.engine, "listed", engine.listed)
    assert orphans.remove() == [], why
    assert engine.removed() == [], why


def test_a_live_runs_cluster_is_never_removed(tmp_path, monkeypatch):
    path = lock_of(tmp_path, {"pid": 4242, "since": SINCE})
    # Another process holds the lock, as a live run does (the record is the same as a killed run's).
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); "
            "sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    engine = Engine(tmp_path)
    monkeypatch.setattr(orphans, "_docker", engine)
    monkeypatch.setattr(orphans.engine, "inspected", engine.inspected)
    monkeypatch.setattr(orphans.engine, "listed", engine.listed)
    try:
        assert holder.stdout.readline() == "held\n"
        assert orphans.remove() == []
        assert engine.removed() == []
    finally:
        holder.kill()
        holder.wait()
    # Its holder gone without marking the end, as a SIGKILL leaves it: now it is an orphan.
    assert [orphan.project for orphan in orphans.remove()] == ["tfc-1-1-train"]

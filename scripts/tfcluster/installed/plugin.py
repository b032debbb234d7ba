"""The pytest plugin (registered by the distribution): a cluster per test, the verdict as data.

    def test_trains_in_sync(tfcluster):
        run = tfcluster.run(command="python train.py", env={"EPOCHS": "2"})
        run.assert_synchronized()

    @pytest.mark.workers(3)
    def test_three_workers(tfcluster): ...

`tfcluster.run(**fields)` takes `Cluster`'s fields (scripts/run's options: command, env, data,
recover, network, ...); the project is pytest's rootdir unless `project=` says otherwise, and
relative paths are from the rootdir. Every test's cluster is a Compose project of its own
(`tfc-pytest-PID-N`), taken down when the test ends, passed or not. The image is set up once,
at the first test that asks for a cluster. The verdict goes into the JUnit report as the test's
property `tfcluster.verdict`.

Clusters run in a process of their own (tfcluster/commands/driven.py): this one is your test's,
where a `trainer` package of yours would hide the harness's. A Ctrl-C reaches that process too
(one process group): it stops its cluster and tears it down, and this waits for it to.
"""

import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tfcluster.cluster.result import Run

MARKER = "workers"
DEFAULT_WORKERS = 2
# Cluster's fields that name paths: taken from pytest's rootdir when relative.
PATH_FIELDS = ("project", "data", "requirements", "junit")
_numbers = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(N): how many workers the test's tfcluster cluster has (default 2)")


def _root() -> Path:
    from tfcluster import paths  # The harness's root, copied or brought up to date on first use.

    return paths.ROOT


def _wait(process: subprocess.Popen) -> int:
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.wait()  # It got the same SIGINT and is stopping its cluster: a kill would strand it.
        raise


def driven(action: str, cluster: dict) -> Run:
    """`Cluster(**cluster).run()` (or `.down()`) in the harness's own process; its Run."""
    with tempfile.TemporaryDirectory(prefix="tfcluster-") as folder:
        request, result = Path(folder, "request.json"), Path(folder, "result.json")
        request.write_text(json.dumps({"action": action, "cluster": cluster}), encoding="utf-8")
        launch = _root() / "scripts" / "launch.py"
        status = _wait(subprocess.Popen([sys.executable, str(launch), "driven", str(request), str(result)]))
        try:
            return Run(**json.loads(result.read_text(encoding="utf-8")))
        except FileNotFoundError:  # Ended before it could say (killed, cancelled): as a shell says it.
            return Run(status if status >= 0 else 128 - status, False, None)


class TFCluster:
    """The `tfcluster` fixture: the test's cluster, under a Compose project name of its own."""

    def __init__(self, node: pytest.Item, workers: int):
        self.node = node
        self.workers = workers
        self.name = f"tfc-pytest-{os.getpid()}-{next(_numbers)}"
        self.runs: list[Run] = []

    def _fields(self, fields: dict) -> dict:
        rootdir = self.node.config.rootpath
        given = {"workers": self.workers, "project": ".", **fields, "name": self.name}
        for name in PATH_FIELDS:
            if given.get(name) is not None:
                given[name] = str(rootdir / given[name])
        given["env_files"] = [str(rootdir / path) for path in given.get("env_files", ())]
        return given

    def run(self, **fields) -> Run:
        """Trains the cluster (Cluster's fields; `name` is the fixture's) and returns its Run."""
        if "name" in fields:
            raise TypeError("tfcluster.run() names its cluster itself (tfcluster.name); give no name")
        run = driven("run", self._fields(fields))
        self.runs.append(run)
        self.node.user_properties.append(("tfcluster.verdict", json.dumps(run.verdict)))
        return run

    def down(self) -> int:
        return driven("down", {"name": self.name, "workers": self.workers}).status


@pytest.fixture(scope="session")
def tfcluster_setup() -> Path:
    """scripts/setup, once a session: Compose, the base image, the wheels, the trainer image."""
    status = _wait(subprocess.Popen([str(_root() / "scripts" / "setup")]))
    if status != 0:
        pytest.fail(f"tfcluster: the set-up failed with exit status {status} (its lines are above)", pytrace=False)
    return _root()


@pytest.fixture
def tfcluster(request: pytest.FixtureRequest, tfcluster_setup: Path):
    """A cluster for this test (`@pytest.mark.workers(N)`: of N workers), always torn down."""
    marker = request.node.get_closest_marker(MARKER)
    workers = marker.args[0] if marker and marker.args else DEFAULT_WORKERS
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        refusal = f"@pytest.mark.{MARKER}({workers!r}): the number of workers is a whole number, 1 or more"
        pytest.fail(refusal, pytrace=False)
    cluster = TFCluster(request.node, workers)
    yield cluster
    cluster.down()

"""The pytest plugin (registered by the distribution): a cluster per test, the verdict as data.

    def test_trains_in_sync(tfcluster):
        run = tfcluster.run(command="python train.py", env={"EPOCHS": "2"})
        run.assert_synchronized()

    @pytest.mark.workers(3)
    def test_three_workers(tfcluster): ...

`tfcluster.run(**fields)` takes `Cluster`'s fields (scripts/run's options: command, env, data,
recover, network, ...); the project is pytest's rootdir unless `project=` says otherwise, and
relative paths are from the rootdir. Every test's cluster is a Compose project of its own
(`tfc-pytest-PID-N`), taken down when the test ends, passed or not (its warm cluster too, if it
asked for one). The set-up runs at the session's first test that asks for a cluster (each run's
own check then finds it done). The verdict goes into the JUnit report as the test's property
`tfcluster.verdict`, and each run's report (report.html, kept in the test's own tmp_path unless
`report=` or `junit=` says where) as `tfcluster.report`, in the test's report as its section
"tfcluster report" (pytest shows it with a failure) and in `assert_synchronized()`'s message.

Clusters run in a process of their own (tfcluster/commands/driven.py): this one is your test's,
where a `trainer` package of yours would hide the harness's. A Ctrl-C at a terminal reaches that
process too (one process group), and a timeout or a signal to pytest alone is passed on to it as
SIGTERM: it stops its cluster and tears it down, and this waits for it to.
"""

import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tfcluster.cluster.fragments import DEFAULT_WORKERS
from tfcluster.cluster.result import Run

MARKER = "workers"
# Cluster's fields that name paths: taken from pytest's rootdir when relative.
PATH_FIELDS = ("project", "data", "requirements", "junit", "report")
REPORT = "tfcluster.report"  # The user property, and the test report's section, naming each run's page.
_numbers = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(N): how many workers the test's tfcluster cluster has (default 2)")


def _root() -> Path:
    # The harness's root, copied or brought up to date on first use; not tfcluster.paths, which
    # would put the copy on this process's path, where your own modules are.
    from tfcluster import home

    return home.root_of(Path(__file__).resolve().parents[1])


def _wait(process: subprocess.Popen) -> int:
    try:
        return process.wait()
    except BaseException:
        # A Ctrl-C at a terminal reached it too; a timeout (pytest-timeout) or a signal sent to
        # this process alone did not: either way it stops its cluster and takes it down, and a
        # kill would strand it.
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait()
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

    def __init__(self, node: pytest.Item, workers: int, folder: Path):
        self.node = node
        self.workers = workers
        # Where its runs' reports go: the run's own folder goes with its cluster at the test's end.
        self.folder = folder
        self.name = f"tfc-pytest-{os.getpid()}-{next(_numbers)}"
        self.runs: list[Run] = []
        # Whether a run asked for the warm cluster, NAME-warm, which outlives its runs.
        self.warm = False

    def _fields(self, fields: dict) -> dict:
        rootdir = self.node.config.rootpath
        # The rootdir is the project, unless a TRAINER_SCRIPT (a project of one file) says otherwise.
        project = {} if os.environ.get("TRAINER_SCRIPT") else {"project": "."}
        given = {"workers": self.workers, **project, **fields, "name": self.name}
        for name in PATH_FIELDS:
            if given.get(name) is not None:
                given[name] = str(rootdir / given[name])
        if not isinstance(given.get("env_files", ()), str):  # A string is refused, naming it, by Cluster.
            given["env_files"] = [str(rootdir / path) for path in given.get("env_files", ())]
        return given

    def run(self, **fields) -> Run:
        """Trains the cluster (Cluster's fields; `name` is the fixture's) and returns its Run."""
        if "name" in fields:
            raise TypeError("tfcluster.run() names its cluster itself (tfcluster.name); give no name")
        if fields.get("report") is None and fields.get("junit") is None:
            fields = {**fields, "report": str(self.folder / f"report-{len(self.runs) + 1}.html")}
        asked = self._fields(fields)
        self.warm = self.warm or bool(asked.get("warm"))
        run = driven("run", asked)
        self.runs.append(run)
        self.node.user_properties.append(("tfcluster.verdict", json.dumps(run.verdict)))
        if run.report:
            self.node.user_properties.append((REPORT, run.report))
        return run

    def down(self) -> list[str]:
        """Takes the test's cluster down, and its warm one if it had one; what could not be."""
        actions = ["down", *(["warm_down"] if self.warm else [])] if self.runs else []
        statuses = {action: driven(action, {"name": self.name, "workers": self.workers}).status for action in actions}
        return [
            f"{action} of {self.name} ended with exit status {status}" for action, status in statuses.items() if status
        ]


@pytest.fixture(scope="session")
def tfcluster_setup() -> Path:
    """scripts/setup, once a session: Compose, the base image, the wheels, the trainer image."""
    status = _wait(subprocess.Popen([str(_root() / "scripts" / "setup")]))
    if status != 0:
        pytest.fail(f"tfcluster: the set-up failed with exit status {status} (its lines are above)", pytrace=False)
    return _root()


@pytest.fixture
def tfcluster(request: pytest.FixtureRequest, tfcluster_setup: Path, tmp_path: Path):
    """A cluster for this test (`@pytest.mark.workers(N)`: of N workers), always torn down."""
    marker = request.node.get_closest_marker(MARKER)
    workers = marker.args[0] if marker and marker.args else DEFAULT_WORKERS
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        refusal = f"@pytest.mark.{MARKER}({workers!r}): the number of workers is a whole number, 1 or more"
        pytest.fail(refusal, pytrace=False)
    cluster = TFCluster(request.node, workers, tmp_path)
    yield cluster
    problems = cluster.down()
    if problems:
        pytest.fail(f"tfcluster: the cluster was not taken down: {'; '.join(problems)}", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Each run's report named in the test's own report, a section pytest shows with a failure."""
    outcome = yield
    made = outcome.get_result()
    pages = [value for name, value in item.user_properties if name == REPORT]
    if made.when == "call" and pages:
        made.sections.append(("tfcluster report", "\n".join(pages)))

"""The pytest plugin (tfcluster/installed/plugin.py), in a pytest session of its own (pytester),
with the harness's process stood in for: what each test's cluster is asked for, and that it is
torn down whatever the test does."""

import json

pytest_plugins = ["pytester"]

CONFTEST = """
import json
import pytest
from tfcluster.cluster.result import Run
from tfcluster.installed import plugin

CALLS = []

@pytest.fixture(scope="session")
def tfcluster_setup():  # The image is not set up here.
    return None

def driven(action, cluster):
    CALLS.append({"action": action, **cluster})
    with open("calls.json", "w") as written:
        json.dump(CALLS, written)
    if action == "down":
        return Run(0, False, None, name=cluster["name"])
    problems = ["model state differs at the end (step 12): worker-1 differs from worker-0"]
    failed = cluster.get("env", {}).get("DRIFT") == "1"
    record = {"passed": not failed, "expected_workers": cluster["workers"], "workers": [],
              "synchronization": {"proven": [] if failed else ["state: bitwise identical"]},
              "problems": problems if failed else []}
    return Run(7 if failed else 0, True, record, name=cluster["name"], report=cluster.get("report"))

plugin.driven = driven
"""

TESTS = """
import pytest

def test_in_sync(tfcluster):
    tfcluster.run(command="python train.py", data="data").assert_synchronized()

@pytest.mark.workers(3)
def test_drifting(tfcluster):
    tfcluster.run(env={"DRIFT": "1"}).assert_synchronized()

@pytest.mark.workers(0)
def test_no_workers(tfcluster):
    pass
"""


def test_each_test_gets_its_own_cluster_of_the_marked_size_always_torn_down(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_training=TESTS)
    result = pytester.runpytest("-p", "tfcluster.installed.plugin", "--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.workers(0): the number of workers is a whole number, 1 or more",
            "E*AssertionError: the workers did not train in sync, exit status 7 (Compose project tfc-pytest-*):",
            "E*verdict: FAIL: 1 problem(s)",
            "E*- model state differs at the end (step 12): worker-1 differs from worker-0",
            "E*report: */test_drifting0/report-1.html",
            "*- tfcluster report -*",
            "*/test_drifting0/report-1.html",
        ]
    )
    calls = json.loads((pytester.path / "calls.json").read_text())
    runs = [call for call in calls if call["action"] == "run"]
    downs = [call for call in calls if call["action"] == "down"]
    assert [run["workers"] for run in runs] == [2, 3]
    # The project is the rootdir, and so are relative paths given.
    assert runs[0]["project"] == str(pytester.path / ".")
    assert runs[0]["data"] == str(pytester.path / "data")
    assert runs[0]["command"] == "python train.py"
    # Each run's report in the test's own tmp_path: the run's folder goes with its cluster.
    assert [run["report"].rsplit("/", 2)[1:] for run in runs] == [
        ["test_in_sync0", "report-1.html"],
        ["test_drifting0", "report-1.html"],
    ]
    # A name of each test's own, and each one taken down, the failed test's too.
    assert len({run["name"] for run in runs}) == 2
    assert [down["name"] for down in downs] == [run["name"] for run in runs]


def test_a_test_may_not_name_its_cluster(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile("def test_named(tfcluster):\n    tfcluster.run(name='mine')\n")
    result = pytester.runpytest("-p", "tfcluster.installed.plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TypeError: tfcluster.run() names its cluster itself (tfcluster.name); give no name"])


def test_a_warm_cluster_is_taken_down_too_and_a_failed_teardown_is_an_error(pytester):
    conftest = CONFTEST.replace(
        """    if action == "down":
        return Run(0, False, None, name=cluster["name"])""",
        """    if action in ("down", "warm_down"):
        runs = [call for call in CALLS if call["action"] == "run" and call["name"] == cluster["name"]]
        return Run(0 if runs[-1].get("warm") else 3, False, None, name=cluster["name"])  # The cold one fails.""",
    )
    assert conftest != CONFTEST
    pytester.makeconftest(conftest)
    tests = (
        "def test_warm(tfcluster):\n    tfcluster.run(warm=True)\n\ndef test_cold(tfcluster):\n    tfcluster.run()\n"
    )
    pytester.makepyfile(test_warm=tests)
    result = pytester.runpytest("-p", "tfcluster.installed.plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*tfcluster: the cluster was not taken down: down of tfc-pytest-* ended with exit status 3"]
    )
    calls = json.loads((pytester.path / "calls.json").read_text())
    assert [call["action"] for call in calls] == ["run", "down", "warm_down", "run", "down"]


def test_a_report_or_junit_given_is_where_the_report_goes_and_the_junit_file_names_each_page(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        "def test_given(tfcluster):\n    tfcluster.run(report='out/page.html')\n\n"
        "def test_beside_junit(tfcluster):\n    tfcluster.run(junit='out/verdict.xml')\n"
    )
    result = pytester.runpytest("-p", "tfcluster.installed.plugin", "-p", "no:cacheprovider", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2)
    runs = [call for call in json.loads((pytester.path / "calls.json").read_text()) if call["action"] == "run"]
    assert [run.get("report") for run in runs] == [str(pytester.path / "out/page.html"), None]
    junit = (pytester.path / "junit.xml").read_text()
    assert f'<property name="tfcluster.report" value="{pytester.path / "out/page.html"}" />' in junit

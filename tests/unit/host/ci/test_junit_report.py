"""A run's verdict read back as data, and as --junit's report: it fails whenever the run does, and
passes only when it passed (tfcluster/cluster/verdict.py, tfcluster/ci/junit.py)."""

import subprocess
from xml.etree import ElementTree

import pytest
from tfcluster import Cluster
from tfcluster.cluster import steps, verdict
from tfcluster.cluster.compose import ComposeProject
from tfcluster.commands import run

from tests.unit.host.conftest import TUTORIAL_LOGS, verifier_log


@pytest.fixture
def compose(monkeypatch):
    """Stands in for `docker compose logs`: the workers' saved logs, and the verifier's log of its
    verdict on them with the exit codes set (None: a verifier that gave no verdict)."""
    exits = {"worker-0": 0, "worker-1": 0}
    asked = []

    def answer(_project, *arguments, **_options):
        asked.append(arguments[0])
        service = arguments[-1]
        if service == "verifier":
            text = (
                "verify | waiting up to 3690s for worker-0, worker-1\n"
                if None in exits.values()
                else verifier_log(exits)
            )
        else:
            text = (TUTORIAL_LOGS / f"{service}.log").read_text()
        return subprocess.CompletedProcess(arguments, 0, stdout=text)

    monkeypatch.setattr(ComposeProject, "compose", answer)
    return exits, asked


def read_back(tmp_path, status, *, ran=True) -> tuple[steps.Execution, ElementTree.Element]:
    path = tmp_path / "reports" / "verdict.xml"
    plan = Cluster(junit=str(path), environ={}).plan()
    execution = steps.Execution(plan, {}, ran=ran, status=status)
    verdict.read_back(execution, plan.junit)
    return execution, ElementTree.fromstring(path.read_text())


def failures(suite: ElementTree.Element) -> dict[str, str]:
    return {case.get("name"): case.find("failure").get("message") for case in suite if case.find("failure") is not None}


def test_a_passing_run_passes_with_a_case_per_worker_and_their_agreement(compose, tmp_path):
    execution, suite = read_back(tmp_path, 0)
    assert [case.get("name") for case in suite] == [
        "worker-0",
        "worker-1",
        "model states identical",
        "each worker's data its own",
        "metrics agree",
    ]
    assert (suite.get("tests"), suite.get("failures")) == ("5", "0")
    # Saved logs older than the observer's keys of the data: that case is skipped, not passed.
    [own] = [case for case in suite if case.get("name") == "each worker's data its own"]
    assert own.find("skipped").get("message") == "data: not judged"
    # The same verdict, as data: each worker's status and metrics, and its log.
    assert execution.verdict["passed"] is True
    assert [worker["name"] for worker in execution.verdict["workers"]] == ["worker-0", "worker-1"]
    assert execution.verdict["workers"][0]["metrics"]["replicas"] == 2
    assert set(execution.logs) == {"worker-0", "worker-1"}


def test_a_worker_that_exited_non_zero_fails_its_case(compose, tmp_path):
    exits, _asked = compose
    exits["worker-1"] = 3
    execution, suite = read_back(tmp_path, 7)
    assert set(failures(suite)) == {"worker-1"}
    assert "exited 3" in failures(suite)["worker-1"]
    assert execution.verdict["passed"] is False
    assert "exited 3" in execution.verdict["workers"][1]["problem"]


def test_a_run_that_failed_after_a_passing_verdict_fails_a_case_of_its_own(compose, tmp_path):
    _execution, suite = read_back(tmp_path, 143)
    assert failures(suite) == {"scripts/run": "scripts/run exited 143, though the verifier's verdict passed"}
    assert (suite.get("tests"), suite.get("failures")) == ("6", "1")


def test_a_verifier_stopped_before_its_verdict_fails_the_report(compose, tmp_path):
    exits, _asked = compose
    exits["worker-1"] = None
    execution, suite = read_back(tmp_path, 143)
    assert failures(suite) == {"scripts/run": "the run ended with exit status 143 before the verifier gave a verdict"}
    assert execution.verdict is None
    assert set(execution.logs) == {"worker-0", "worker-1"}  # The workers' logs are read all the same.


def test_a_run_that_ended_before_its_workers_fails_without_asking_compose(compose, tmp_path):
    _exits, asked = compose
    execution, suite = read_back(tmp_path, 2, ran=False)
    assert failures(suite) == {"scripts/run": "the run ended with exit status 2 before its workers had run"}
    assert asked == []  # An earlier run's containers are not this run's verdict.
    assert execution.verdict is None


def test_a_report_that_cannot_be_judged_is_written_failing_all_the_same(monkeypatch, tmp_path):
    def broken(*_arguments):
        raise OSError("docker: not found")

    monkeypatch.setattr(verdict, "_read", broken)
    _execution, suite = read_back(tmp_path, 0)
    assert failures(suite) == {"scripts/run": "the run ended with exit status 0; its report failed: docker: not found"}


def test_an_interrupted_run_still_writes_its_report(monkeypatch, tmp_path):
    def interrupted(_step, _execution):
        raise KeyboardInterrupt

    monkeypatch.setattr(steps.SetUp, "run", interrupted)
    path = tmp_path / "verdict.xml"
    with pytest.raises(KeyboardInterrupt):
        run.main(["--junit", str(path)], environ={})
    suite = ElementTree.fromstring(path.read_text())
    assert failures(suite) == {"scripts/run": "the run ended with exit status 130 before its workers had run"}


def test_while_the_run_is_under_way_its_report_fails_so_a_run_killed_outright_leaves_a_failing_one(
    monkeypatch, tmp_path
):
    path = tmp_path / "verdict.xml"
    path.write_text("<testsuite tests='1' failures='0'/>")  # An earlier run's passing report, in a reused workspace.
    seen = []

    def killed(_step, _execution):
        # What a SIGKILL here would leave: the report as it is at this moment.
        seen.append(failures(ElementTree.fromstring(path.read_text())))
        raise KeyboardInterrupt

    monkeypatch.setattr(steps.SetUp, "run", killed)
    with pytest.raises(KeyboardInterrupt):
        run.main(["--junit", str(path)], environ={})
    assert seen == [
        {
            "scripts/run": "the run did not end: it was killed before it could write its verdict "
            "(SIGKILL, or its runner died)"
        }
    ]

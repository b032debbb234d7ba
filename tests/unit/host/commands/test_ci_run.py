"""scripts/ci-run (tfcluster/commands/ci_run.py): the CI step's variables as scripts/run's
options, its status as the step's output, and bad input in one line, with nothing started."""

import subprocess

import pytest
from tfcluster.commands import ci_run

from tests.conftest import ROOT


def test_each_variable_becomes_its_option_and_empty_ones_none():
    environ = {
        "TFCLUSTER_CI_PROJECT": "examples/custom-loop",
        "TFCLUSTER_CI_COMMAND": "python train.py --fast",
        "TFCLUSTER_CI_WORKERS": "3",
        "TFCLUSTER_CI_NETWORK": "",
        "TFCLUSTER_CI_BAKE": "true",
        "TFCLUSTER_CI_JUNIT": "reports/v.xml",
        "TFCLUSTER_CI_REPORT": "reports/v.html",
    }
    assert ci_run.arguments_of(environ) == [
        "--workers", "3", "--junit", "reports/v.xml",
        "--project", "examples/custom-loop", "--command", "python train.py --fast", "--report", "reports/v.html",
        "--bake",
    ]  # fmt: skip
    # The built-in trainer: nothing to bake; the defaults of the action and the template.
    assert ci_run.arguments_of({"TFCLUSTER_CI_BAKE": "true"}) == ["--workers", "2", "--junit", "tfcluster-verdict.xml"]


def test_the_runs_status_is_the_steps_and_its_output(monkeypatch, tmp_path):
    output = tmp_path / "github-output"
    monkeypatch.setattr(ci_run.run, "main", lambda _argv, _environ, first: 7)
    assert ci_run.main([], environ={"GITHUB_OUTPUT": str(output)}) == 7
    assert output.read_text() == "status=7\n"


@pytest.mark.parametrize(
    ("variables", "arguments", "message"),
    [
        ({"TFCLUSTER_CI_BAKE": "yes"}, [], "ci-run: TFCLUSTER_CI_BAKE must be true or false, got 'yes'\n"),
        ({}, ["--workers", "3"], "ci-run: unknown argument '--workers' (usage: scripts/ci-run [-h])\n"),
        ({"TFCLUSTER_CI_WORKERS": "many"}, [], "run: --workers must be a whole number from 1 to 16, got 'many'\n"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything_starts(variables, arguments, message, tmp_path):
    result = subprocess.run(
        [str(ROOT / "scripts" / "ci-run"), *arguments],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **variables},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (result.returncode, result.stderr, result.stdout) == (2, message, "")

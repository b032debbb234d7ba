"""The `tfcluster` command (tfcluster/installed/cli.py): a checkout's commands, run from the
folder you are in."""

import pytest
from tfcluster.installed import cli


def test_run_without_a_project_runs_the_folder_you_are_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRAINER_SCRIPT", raising=False)
    assert cli._arguments("run", ["--workers", "3"]) == ["--project", str(tmp_path), "--workers", "3"]


@pytest.mark.parametrize(
    "arguments", [["--project", "x"], ["--project=x"], ["--help"], ["-h"], ["--warm-down"]], ids=str
)
def test_run_asked_for_another_project_or_no_run_is_left_as_it_is(arguments, monkeypatch):
    monkeypatch.delenv("TRAINER_SCRIPT", raising=False)
    assert cli._arguments("run", arguments) == arguments


def test_a_trainer_script_is_not_given_a_project_too(monkeypatch):
    monkeypatch.setenv("TRAINER_SCRIPT", "./train.py")
    assert cli._arguments("run", []) == []
    assert cli._arguments("verify", ["a.log"]) == ["a.log"]


def test_an_unknown_command_is_one_line_naming_it_and_exit_2(capsys):
    assert cli.main(["rnu"]) == 2
    assert (
        capsys.readouterr().err
        == "tfcluster: unknown command 'rnu' (did you mean run?) (one of run, verify, setup, nodes)\n"
    )


def test_no_command_prints_the_usage_to_stderr_and_exit_2_help_to_stdout_and_0(capsys):
    assert cli.main([]) == 2
    assert capsys.readouterr().err.startswith("usage: tfcluster COMMAND")
    assert cli.main(["--help"]) == 0
    assert "  run      set up what is missing" in capsys.readouterr().out

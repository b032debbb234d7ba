"""Every host command's --help: at once, first wherever it is, with examples and the contract's exit codes."""

import re
import subprocess
import sys

import pytest
from tfcluster.commands import docs as commands_doc

from trainer.contract.exitcodes import ExitCode

COMMANDS = [command for command, _purpose in commands_doc.COMMANDS]


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_answers_help_at_once_and_touches_nothing(sandbox, command, flag):
    result = sandbox.run(command, flag)
    assert result.returncode == ExitCode.OK, result.stderr
    assert result.stdout.startswith("usage: "), result.stdout
    assert result.stderr == ""
    sandbox.assert_untouched()
    # No virtual environment made on the way (scripts/test's .venv, scripts/benchmark's .venv-bench).
    assert not (sandbox.root / ".venv").exists() and not (sandbox.root / ".venv-bench").exists()


def test_help_comes_first_wherever_it_is_among_the_arguments(sandbox):
    for command, arguments in [
        ("scripts/run", ["--worker", "3", "--help"]),
        ("scripts/partition", ["worker-1", "--now", "-h"]),
        ("scripts/benchmark", ["--runs", "0", "--help"]),
        ("scripts/setup", ["--bogus", "--help"]),
        ("scripts/test", ["tests/unit", "-x", "--help"]),
    ]:
        result = sandbox.run(command, *arguments)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"usage: {command} [-h]"), result.stdout
    sandbox.assert_untouched()


def test_scripts_test_says_its_arguments_go_to_pytest(sandbox):
    text = sandbox.run("scripts/test", "--help").stdout
    assert "passed to pytest" in text
    assert "scripts/test tests/unit -q" in text
    assert "scripts/test -- --help" in text


def exit_status_section(text: str) -> list[tuple[int, str]]:
    """The (code, meaning) lines under the help's `exit status` heading."""
    section = re.search(r"^exit status.*?:\n((?:  .*\n?)+)", text, re.MULTILINE)
    assert section, "no `exit status` section"
    return [(int(code), meaning) for code, meaning in re.findall(r"^  (\d+)\s+(.*)$", section.group(1), re.MULTILINE)]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_has_examples_and_its_exit_codes(sandbox, command):
    text = sandbox.run(command, "--help").stdout
    assert re.search(r"^examples:\n  scripts/", text, re.MULTILINE), "no examples"
    codes = [code for code, _meaning in exit_status_section(text)]
    assert codes[0] == ExitCode.OK and ExitCode.CONFIG_ERROR in codes


@pytest.mark.parametrize("command", [command for command in COMMANDS if command != "scripts/test"])
def test_exit_codes_are_named_as_in_the_contract(sandbox, command):
    # scripts/test's are pytest's own; every other command says each shared code in the same words.
    for code, meaning in exit_status_section(sandbox.run(command, "--help").stdout):
        if code in set(ExitCode):
            assert meaning.startswith(ExitCode(code).name.lower().replace("_", " ")), (code, meaning)


def test_scripts_benchmark_prints_the_benchmark_commands_own_help(sandbox):
    # The wrapper hands --help to tfcluster.commands.benchmark itself (run by python3: nothing
    # third-party is imported at its top), so the two cannot drift.
    wrapper = sandbox.run("scripts/benchmark", "--help")
    direct = subprocess.run(
        [sys.executable, "-m", "tfcluster.commands.benchmark", "--help"],
        cwd=sandbox.root,
        env={**sandbox.environment, "PYTHONPATH": f"{sandbox.root / 'scripts'}:{sandbox.root}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert direct.returncode == 0, direct.stderr
    assert wrapper.stdout == direct.stdout


def test_scripts_benchmark_accepts_every_option_of_the_benchmark_command(sandbox):
    # The wrapper checks tfcluster.commands.benchmark's arguments before the set-up: it must know the same options.
    # Each known one is followed by a bad one, so that nothing ever gets past the check.
    text = sandbox.run("scripts/benchmark", "--help").stdout
    options = re.findall(r"^  (--[a-z-]+)( N)?", text, re.MULTILINE)
    assert {option for option, _ in options} == {
        "--runs",
        "--network",
        "--observer",
        "--report",
        "--cancel",
        "--steps",
        "--warm",
        "--comparisons",
        "--in-a-row",
        "--first-run",
    }
    for option, takes_a_number in options:
        result = sandbox.run("scripts/benchmark", option, *(["2"] if takes_a_number else []), "--not-an-option")
        assert result.returncode == 2
        assert result.stderr.startswith("benchmark: unknown argument '--not-an-option'"), result.stderr
    sandbox.assert_untouched()

"""scripts/tfcluster/cluster/compose.py: the `docker compose` commands it builds and the environment it gives them.

Nothing here runs Docker: the commands are built, not run.
"""

import os
import re
import sys
from pathlib import Path

import pytest
from tfcluster.cluster import cancel
from tfcluster.cluster.compose import ROOT, ComposeProject, unique_name
from tfcluster.cluster.plain import strip as stripped

from tests.conftest import ROOT as TESTS_ROOT


def test_the_command_names_the_project_then_compose_yaml_then_the_overrides_in_order():
    project = ComposeProject("b.yaml", Path("/tmp/a.yaml"), name="tfc-bench")
    assert project.command("up", "--exit-code-from", "verifier", "verifier") == [
        "docker",
        "compose",
        "-p",
        "tfc-bench",
        "-f",
        "compose.yaml",
        "-f",
        "b.yaml",
        "-f",
        "/tmp/a.yaml",
        "up",
        "--exit-code-from",
        "verifier",
        "verifier",
    ]


def test_without_overrides_or_arguments_the_command_is_the_project_alone():
    assert ComposeProject(name="p").command() == ["docker", "compose", "-p", "p", "-f", "compose.yaml"]


def test_the_project_runs_from_the_project_root_unless_told_otherwise(tmp_path):
    assert ROOT == TESTS_ROOT
    assert ComposeProject(name="p").cwd == ROOT
    assert ComposeProject(name="p", cwd=str(tmp_path)).cwd == tmp_path


def test_the_environment_is_this_process_s_with_the_given_variables_over_it(monkeypatch):
    monkeypatch.setenv("TFC_TEST_KEPT", "from the host")
    monkeypatch.setenv("TF_NETWORK_PROFILE", "lan")
    project = ComposeProject(name="p", environment={"TF_NETWORK_PROFILE": "wan", "TRAIN_EPOCHS": "1"})
    assert project.environment["TFC_TEST_KEPT"] == "from the host"
    assert project.environment["TF_NETWORK_PROFILE"] == "wan"
    assert project.environment["TRAIN_EPOCHS"] == "1"


def test_the_environment_is_taken_once_and_is_the_project_s_own(monkeypatch):
    monkeypatch.delenv("TFC_TEST_LATER", raising=False)
    project = ComposeProject(name="p")
    project.environment["TFC_TEST_PROJECT_ONLY"] = "x"
    monkeypatch.setenv("TFC_TEST_LATER", "y")
    assert "TFC_TEST_PROJECT_ONLY" not in os.environ
    assert "TFC_TEST_LATER" not in project.environment


def test_unique_names_keep_the_prefix_and_differ():
    names = {unique_name("tfc-test") for _ in range(20)}
    assert len(names) == 20
    assert all(re.fullmatch(r"tfc-test-[0-9a-f]{8}", name) for name in names)


def test_a_log_that_is_not_utf_8_is_read_all_the_same(tmp_path):
    # A program's log may hold any bytes; reading it back must not end the run's report.
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\nprintf 'caf\\351 ok\\n'\n")
    fake.chmod(0o755)
    project = ComposeProject(name="tfc-test-bytes", environment={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert project.compose("logs", "worker-0").stdout == "caf\ufffd ok\n"


@pytest.mark.parametrize("terminal", [True, False])
def test_attached_output_is_plain_text_unless_it_goes_to_a_terminal(monkeypatch, capfdbinary, terminal):
    ran = []

    def run(command, **options):
        ran.append((command, options["env"].get("COMPOSE_ANSI")))
        for name in ("stdout", "stderr"):  # What Compose writes, as it writes it.
            os.write(options.get(name, 1 if name == "stdout" else 2), b"\r\x1b[Kverifier-1 exited with code 0\n")
        os.write(options.get("stdout", 1), b"\x1b[31m\x1b[1mAborting on container exit...\x1b[0m\n")

    monkeypatch.setattr(cancel, "run", run)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: terminal)
    ComposeProject(name="p").attached("up", "verifier")
    assert ran == [
        (["docker", "compose", "-p", "p", "-f", "compose.yaml", "up", "verifier"], None if terminal else "never")
    ]
    out, err = capfdbinary.readouterr()
    if terminal:
        assert out.startswith(b"\r\x1b[K") and err == b"\r\x1b[Kverifier-1 exited with code 0\n"
    else:
        assert out == b"verifier-1 exited with code 0\nAborting on container exit...\n"
        assert err == b"verifier-1 exited with code 0\n"


@pytest.mark.parametrize(
    ("line", "plain"),
    [
        (b"\x1b[32mworker-0-1  |\x1b[0m train | epoch: 1\n", b"worker-0-1  | train | epoch: 1\n"),
        (
            b" Container p-verifier-1  Stopping\r\x1b[2K Container p-verifier-1  Stopped\n",
            b" Container p-verifier-1  Stopping Container p-verifier-1  Stopped\n",
        ),
        (b"\x1b]0;title\x07kept\r\n", b"kept\r\n"),
        (b"no escapes: 100% | \xff bytes\n", b"no escapes: 100% | \xff bytes\n"),
    ],
)
def test_escape_sequences_and_redrawing_carriage_returns_are_stripped(line, plain):
    assert stripped(line) == plain

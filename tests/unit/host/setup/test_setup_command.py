"""scripts/setup against a fake engine: what it builds, when, on which base; what it says when it
cannot go on; and that a failure or a signal ends every step it started."""

import os
import shutil
import signal
import sys
import time

import pytest

TRAINER_BASE = "tfcluster-base:bookworm-slim"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_missing_image_is_built_on_the_offline_base_then_left_alone_while_current(machine):
    first = machine.setup("--image-id-file", "run/image")
    assert first.returncode == 0, first.stderr
    assert machine.builds() == [
        ["compose", "-f", "compose.yaml", "-f", "compose.network.yaml", "build", "--quiet", "worker-0"]
    ]
    assert f"setup | building the trainer image on {TRAINER_BASE}\n" in first.stderr
    assert "Bake" not in first.stderr  # Compose's one warning is dropped.
    assert (machine.root / ".env").read_text() == f"BASE_IMAGE={TRAINER_BASE}\n"
    built = machine.state["images"]["tfcluster:latest"]
    assert (machine.root / "run" / "image").read_text() == f"{built['id']}\n"
    # The online base was asked for first, here; the registry was not, with the offline base here
    # (built before, when it could not be reached: tests/unit/host/setup/test_setup_parts.py).
    asked = [call["arguments"] for call in machine.calls()]
    looked = ["image", "inspect", "--format", "{{.Id}} {{json .RepoTags}}", "python:3.11-slim-bookworm", TRAINER_BASE]
    assert [*looked, "tfcluster-base:bookworm"] in asked
    assert not [arguments for arguments in asked if arguments[0] == "pull"]
    again = machine.setup()
    assert again.returncode == 0, again.stderr
    assert machine.builds() == [] and again.stderr == ""


def test_an_image_from_other_inputs_is_rebuilt_and_one_for_dev_mode_is_current_by_its_dependencies(machine):
    assert machine.setup().returncode == 0
    labels = machine.state["images"]["tfcluster:latest"]["labels"]
    labels["tfcluster.inputs"] = "an older checkout's"
    assert machine.setup("--dev").returncode == 0
    assert machine.builds() == []  # Current by tfcluster.dependencies, all but the code.
    rebuilt = machine.setup()
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert len(machine.builds()) == 1
    assert machine.state["images"]["tfcluster:latest"]["labels"]["tfcluster.inputs"] != "an older checkout's"


def test_an_edit_of_the_code_rebuilds_except_in_dev_mode(machine):
    assert machine.setup().returncode == 0
    with (machine.root / "trainer" / "training" / "loop.py").open("a") as code:
        code.write("# an edit\n")
    assert machine.setup("--dev").returncode == 0
    assert machine.builds() == []
    assert machine.setup().returncode == 0
    assert len(machine.builds()) == 1


def test_with_shaper_both_images_are_built_in_one_build_with_their_digests(machine):
    machine.state["images"]["tfcluster-shaper-base:bookworm-slim"] = {"id": "sha256:shaper-base", "labels": {}}
    result = machine.setup("--shaper")
    assert result.returncode == 0, result.stderr
    [build] = [call for call in machine.calls() if "build" in call["arguments"]]
    assert build["arguments"][-2:] == ["worker-0", "shaper-0"]
    assert all(len(value) == 64 for value in build["variables"].values()), build["variables"]
    assert (
        "setup | building the trainer image on tfcluster-base:bookworm-slim and the network shaper's on "
        in result.stderr
    )
    assert "SHAPER_BASE_IMAGE=tfcluster-shaper-base:bookworm-slim\n" in (machine.root / ".env").read_text()
    assert machine.setup("--shaper").returncode == 0 and machine.builds() == []


@pytest.mark.parametrize(
    ("engine", "path", "line"),
    [
        (False, None, "setup: the Docker engine is not running (docker version could not reach it)"),
        (True, "no docker", "setup: docker is not installed; install Docker Engine first"),
    ],
)
def test_without_docker_or_its_engine_one_line_and_exit_2(machine, tmp_path, engine, path, line):
    machine.state["engine"] = engine
    variables = {}
    if path:  # A PATH with what runs the set-up, and no docker.
        (tmp_path / "no-docker").mkdir()
        tools = {"python3": os.path.realpath(sys.executable)} | {
            tool: shutil.which(tool) for tool in ("bash", "dirname")
        }
        for tool, found in tools.items():
            (tmp_path / "no-docker" / tool).symlink_to(found)
        variables["PATH"] = str(tmp_path / "no-docker")
    result = machine.setup(**variables)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [line]
    assert machine.builds() == []


def test_a_failed_step_ends_the_others_at_once(machine):
    # No base here: the pull hangs (a registry that does not answer); the wheels' download fails meanwhile.
    machine.state["images"] = {}
    machine.state["pull_seconds"] = 60
    (machine.root / "docker" / "wheels" / ".requirements.sha256").write_text("stale\n")
    started = time.monotonic()
    result = machine.setup(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(machine.root / "nowhere"))
    assert time.monotonic() - started < 20
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == "setup: pip download exited 1: it said why above"
    [pull] = [call for call in machine.calls() if call["arguments"][0] == "pull"]
    assert not alive(pull["pid"])
    assert machine.builds() == []


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_set_up_and_what_it_started(machine, number):
    machine.state["images"] = {}  # No base here: the registry is asked, and hangs.
    machine.state["pull_seconds"] = 60
    process = machine.start()
    deadline = time.monotonic() + 30
    while not [call for call in machine.calls() if call["arguments"][0] == "pull"]:
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.05)
    [pull] = [call for call in machine.calls() if call["arguments"][0] == "pull"]
    process.send_signal(number)
    process.communicate(timeout=20)
    assert process.returncode == 128 + number
    assert not alive(pull["pid"])


def test_the_superseded_base_is_removed_when_it_is_there_and_not_asked_for_otherwise(machine):
    assert machine.setup().returncode == 0
    assert not [call for call in machine.calls() if call["arguments"][:2] == ["image", "rm"]]
    machine.state["images"]["tfcluster-base:bookworm"] = {"id": "sha256:unslimmed", "labels": {}}
    assert machine.setup().returncode == 0
    removed = [call["arguments"] for call in machine.calls() if call["arguments"][:2] == ["image", "rm"]]
    assert removed == [["image", "rm", "tfcluster-base:bookworm"]]
    assert "tfcluster-base:bookworm" not in machine.state["images"]

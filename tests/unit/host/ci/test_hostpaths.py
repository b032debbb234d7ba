"""scripts/tfcluster/ci/hostpaths.py: when a run is in a container other than its engine's host, and what it says."""

import socket
import subprocess

import pytest
from tfcluster.ci import hostpaths


@pytest.fixture
def engine(monkeypatch):
    """`docker info`'s engine name, as set by the test."""
    named = {"name": socket.gethostname()}

    def docker_info(command, **_options):
        assert command[:2] == ["docker", "info"]
        return subprocess.CompletedProcess(command, 0, stdout=named["name"] + "\n")

    monkeypatch.setattr(hostpaths.subprocess, "run", docker_info)
    return named


def test_a_machine_without_a_container_marker_is_not_a_container(engine, monkeypatch, tmp_path):
    monkeypatch.setattr(hostpaths, "CONTAINER_MARKERS", (tmp_path / ".dockerenv",))
    engine["name"] = "another-host"
    assert not hostpaths.in_container({})


def test_a_container_is_one_only_when_the_engine_is_on_another_host(engine, monkeypatch, tmp_path):
    (tmp_path / ".dockerenv").touch()
    monkeypatch.setattr(hostpaths, "CONTAINER_MARKERS", (tmp_path / ".dockerenv",))
    assert not hostpaths.in_container({})  # A machine that is a container, its engine beside it.
    engine["name"] = "the-runners-host"
    assert hostpaths.in_container({})  # A job container driving the host's engine.


def test_the_refusal_names_the_source_and_the_way_out():
    line = hostpaths.refusal("--project", "/w/model")
    assert line.startswith("--project /w/model: the Docker engine does not see it at that path")
    assert "mount the checkout at the same path in the job container, or use --bake" in line
    assert "--bake" not in hostpaths.refusal("--data", "/w/data")


def test_a_source_with_a_comma_is_one_field_of_the_mount():
    assert hostpaths.csv_field("source=/w/model") == "source=/w/model"
    assert hostpaths.csv_field('source=/w/a,"b"') == '"source=/w/a,""b"""'

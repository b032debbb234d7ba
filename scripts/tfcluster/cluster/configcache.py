"""`docker compose config` only when something it reads has changed (a warm run's, tfcluster/cluster/warm.py).

A warm run needs its services as Compose resolves them (their environments, commands and image),
and asking Compose takes 0.2 to 0.3 s, a tenth of the run. What Compose resolves them from is
known: the Compose files, the files they `extends:`, .env, the env file they name (your project's
variables), the environment it is given, and Compose itself. A digest of all of those keys the
result kept from the last time, so a change of any of them is never missed, and a run that
changed none of them does not start Compose.
"""

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

from tfcluster.setup import compose
from tfcluster.setup.files import replace_whole

# `extends: {file: NAME, service: ...}` in a Compose file: a file Compose reads besides the run's.
_EXTENDED = re.compile(r"^\s*file:\s*['\"]?([^'\"\s#]+)", re.MULTILINE)
DEFAULT_ENV_FILE = ".tfcluster/env"


def read_files(environment: dict[str, str]) -> list[str]:
    """What Compose reads to resolve the run's files, by their names from the root, in order."""
    files = [name for name in environment.get("COMPOSE_FILE", "").split(":") if name]
    return [*files, ".env", environment.get("TFCLUSTER_ENV_FILE") or DEFAULT_ENV_FILE]


def key(environment: dict[str, str], root: Path) -> str:
    """The digest of everything `docker compose config` resolves from, for `environment`."""
    # The root too: Compose resolves relative paths (build contexts, bind mounts) from it.
    digest = hashlib.sha256(json.dumps([str(root.resolve()), sorted(environment.items())]).encode())
    names = read_files(environment)
    for name in names:
        content = _content(root / name)
        digest.update(f"\0{name}\0{len(content)}\0".encode() + content)
        for extended in _EXTENDED.findall(content.decode(errors="replace")):
            if extended not in names:
                names.append(extended)  # Read in its turn, and what it extends with it.
    digest.update(json.dumps(compose.stamps(environment), sort_keys=True).encode())  # Which Compose resolves.
    return digest.hexdigest()


def cached(path: Path, environment: dict[str, str], root: Path, resolve: Callable[[], dict]) -> dict:
    """The configuration `resolve()` gives, kept in `path` with its key: resolved again only when
    the key differs."""
    wanted = key(environment, root)
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept.get("key") == wanted:
            return kept["config"]
    except (OSError, ValueError, AttributeError):
        pass  # None kept, or not whole: resolved again.
    config = resolve()
    replace_whole(path, json.dumps({"key": wanted, "config": config}))
    return config


def _content(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b"\0(not there)"

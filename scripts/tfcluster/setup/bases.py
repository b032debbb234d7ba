"""The base images: the standard one when it is here or can be pulled, else an equivalent built
from Debian's packages with mmdebstrap (the same Debian release, and for the trainer the same
Python 3.11). The choice is remembered in .env, which Compose reads, so that a later plain
`docker compose up` builds on the same."""

import dataclasses
import json
import shutil
import subprocess
import time
from pathlib import Path

from tfcluster.setup.children import Children, CommandFailed
from tfcluster.setup.files import replace_whole
from tfcluster.setup.messages import say

# How long a pull may try before the registry counts as unreachable.
PULL_TIMEOUT = 120
# Like the slim images: no manual pages, translations or documentation (copyrights kept).
SLIM = (
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
)


@dataclasses.dataclass(frozen=True)
class Base:
    variable: str  # Where .env remembers the choice, for Compose.
    online: str
    offline: str
    packages: tuple[str, ...]


TRAINER = Base(
    "BASE_IMAGE",
    "python:3.11-slim-bookworm",
    "tfcluster-base:bookworm-slim",
    ("python3", "python3-venv", "ca-certificates"),
)
SHAPER = Base(
    "SHAPER_BASE_IMAGE",
    "debian:bookworm-slim",
    "tfcluster-shaper-base:bookworm-slim",
    ("python3", "iproute2", "iptables"),
)
# The unslimmed base of earlier versions of the set-up, superseded.
SUPERSEDED = "tfcluster-base:bookworm"


def choose(base: Base, children: Children, *, also: tuple[str, ...] = ()) -> tuple[str, str, set[str]]:
    """The image to build on and its id: `base.online` if it is here; else `base.offline` if it is
    here (built before, when the registry could not be reached: the registry is not asked again at
    every run, where a refused pull costs 0.1 s and one that hangs PULL_TIMEOUT); else
    `base.online` if it can be pulled, else `base.offline`, built. Then which of `also` are here:
    one question to the engine for all of them."""
    here = ids(children, [base.online, base.offline, *also])
    pull = ["timeout", str(PULL_TIMEOUT), "docker", "pull", "--quiet", base.online]
    if base.online in here or (base.offline not in here and children.succeeds(pull)):
        chosen = base.online
    else:
        chosen = base.offline
        if chosen not in here:
            build(base, children)
    if chosen not in here:
        here.update(ids(children, [chosen]))
    return chosen, here[chosen], {name for name in also if name in here}


def ids(children: Children, names: list[str]) -> dict[str, str]:
    """The id of each image of `names` that is here (by name:tag, as `docker pull` names them)."""
    found = children.run(
        ["docker", "image", "inspect", "--format", "{{.Id}} {{json .RepoTags}}", *names], check=False, capture=True
    )
    here = {}
    for line in found.splitlines():
        image_id, _, tags = line.partition(" ")
        here.update({name: image_id for name in names if name in json.loads(tags or "[]")})
    return here


def build(base: Base, children: Children) -> None:
    say(f"no registry reachable: building {base.offline} from Debian packages (about 30 s)")
    started = time.monotonic()
    if shutil.which("mmdebstrap") is None:
        say("installing mmdebstrap (Debian's package), which builds it")
        children.run(["apt-get", "update", "-qq"])
        children.run(["apt-get", "install", "-y", "-qq", "mmdebstrap"], stdout=subprocess.DEVNULL)
    root = [
        "mmdebstrap",
        "--quiet",
        "--variant=minbase",
        f"--include={','.join(base.packages)}",
        *SLIM,
        "bookworm",
        "-",
    ]
    tar = children.start(root, stdout=subprocess.PIPE)
    try:
        imported = children.start(["docker", "import", "-", base.offline], stdin=tar.stdout, stdout=subprocess.DEVNULL)
        tar.stdout.close()  # docker import's alone now: mmdebstrap sees it end if it does.
        try:
            imported_status = imported.wait()
        finally:
            children.finished(imported)
        tar_status = tar.wait()
    finally:
        children.finished(tar)
    for command, status in ((root, tar_status), (["docker", "import"], imported_status)):
        if status != 0:
            raise CommandFailed(command, status)
    say(f"built {base.offline} in {time.monotonic() - started:.0f} s")


def remember(env_file: Path, variable: str, value: str) -> None:
    """`variable=value` in `env_file` (made if missing), replacing the variable's earlier line."""
    lines = env_file.read_text(encoding="utf-8").splitlines() if env_file.exists() else []
    wanted = f"{variable}={value}"
    if wanted in lines:
        return
    kept = [line for line in lines if not line.startswith(f"{variable}=")]
    replace_whole(env_file, "".join(f"{line}\n" for line in [*kept, wanted]))

"""scripts/run --dev: the working tree's trainer/ in the containers, with no image build.

Every container of the run that runs the harness's code (the workers, the verifier, the keeper)
gets this checkout's trainer/ bind-mounted read-only over the image's /app/trainer, so an edit of
the launcher, the verifier or the built-in trainer reaches the next run without a build (about 4 s
on this machine's storage driver, docs/performance.md). The set-up then builds the image only when
what it holds besides the code is out of date (scripts/setup --dev). The image stays the path for
CI and for what is committed: without --dev the code is the image's. Host only, standard library only.
"""

import json
from pathlib import Path

from tfcluster.cluster.compose import VERDICT_SERVICE
from tfcluster.cluster.fragments import KEEPER

# Written by scripts/run into the run's folder (tfcluster/cluster/runs.py), read by Compose through COMPOSE_FILE.
DEV_FILE = "compose.dev.yaml"
# Where the image holds the harness's code (docker/Dockerfile: `COPY trainer/ /app/trainer/`).
TARGET = "/app/trainer"


def services(worker_names: list[str], recover: bool) -> list[str]:
    """The run's services that run this project's code from the trainer image."""
    return [*worker_names, VERDICT_SERVICE, *([KEEPER] if recover else [])]


def render(names: list[str], root: Path) -> str:
    """The Compose override: root/trainer read-only at /app/trainer on each named service."""
    source = root / "trainer"
    lines = ["# Written by `scripts/run --dev`: this checkout's trainer/ over the image's. Do not edit.", "services:"]
    for name in names:
        lines += [
            f"  {name}:",
            "    volumes:",
            # The long syntax: a missing source is an error, where the short one would make a folder.
            f"      - {{type: bind, source: {json.dumps(str(source))}, target: {TARGET}, read_only: true}}",
        ]
    return "\n".join(lines) + "\n"

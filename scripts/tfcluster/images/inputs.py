"""What each image's build reads: one list an image, which scripts/setup digests (digest.py) to tell
whether the image is current, and which tests/unit/host/images/test_inputs.py holds equal to the
image's Dockerfile (every COPY and bind mount it makes is in its list, and nothing else is).

`code` is what `scripts/run --dev` mounts over the image's: the trainer image's label
tfcluster.dependencies digests all but it, so that a development run does not rebuild for a code
change. trainer/contract/stacks.py and trainer/observer/ are copied outside /app/trainer, where
that mount does not reach: they are dependencies, even in development mode.
"""

import dataclasses
import re
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Inputs:
    dockerfile: str
    dependencies: tuple[str, ...]  # Files and folders, from the checkout's root.
    code: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return self.dependencies + self.code


IMAGES = {
    "trainer": Inputs(
        dockerfile="docker/Dockerfile",
        dependencies=(
            ".dockerignore",
            "docker/Dockerfile",
            "docker/requirements.txt",
            "docker/wheels",
            "docker/extra-wheels",
            "trainer/contract/stacks.py",
            "trainer/observer",
        ),
        code=("trainer",),
    ),
    "shaper": Inputs(
        dockerfile="docker/Dockerfile.shaper",
        dependencies=(
            ".dockerignore",
            "docker/Dockerfile.shaper",
            "trainer/__init__.py",
            "trainer/contract",
            "trainer/shaper",
        ),
    ),
}

# COPY's sources (not from another stage), and bind mounts' (`RUN --mount=type=bind,source=...`).
_COPY = re.compile(r"^COPY\s+(?P<arguments>.+)$", re.MULTILINE)
_MOUNT = re.compile(r"--mount=type=bind,(?:[^ ]*,)?source=(?P<source>[^, ]+)")


def read_by_build(dockerfile_text: str) -> set[str]:
    """The files and folders of the build context that the Dockerfile copies or mounts."""
    text = dockerfile_text.replace("\\\n", " ")  # A continued line is one instruction.
    sources = {found["source"] for found in _MOUNT.finditer(text)}
    for found in _COPY.finditer(text):
        words = [word for word in found["arguments"].split() if not word.startswith("--")]
        if any(word.startswith("--from") for word in found["arguments"].split()):
            continue  # From another stage, not the context.
        sources.update(word.rstrip("/") for word in words[:-1])
    return sources


def disagreements(inputs: Inputs, dockerfile_text: str) -> list[str]:
    """What the list and the Dockerfile disagree on, each said in one line; none when they agree.

    Every source the build reads lies in a listed path; every listed path but .dockerignore and the
    Dockerfile itself (which the build always reads) is a source or holds one."""
    sources = read_by_build(dockerfile_text)
    said = [
        f"{inputs.dockerfile} reads {source}, which is not among its inputs"
        for source in sorted(sources)
        if not any(_within(source, path) for path in inputs.paths)
    ]
    for path in inputs.paths:
        if path in (".dockerignore", inputs.dockerfile):
            continue
        if not any(_within(source, path) for source in sources):
            said.append(f"{path} is an input of {inputs.dockerfile}, which reads nothing of it")
    return said


def _within(path: str, folder: str) -> bool:
    return path == folder or Path(folder) in Path(path).parents

"""The images: each built only when the digest of its inputs (tfcluster.images.digest, over the
lists in tfcluster.images.inputs) is not the one its label records. Compose's builder takes about
2 s even when every layer is cached, and the set-up runs before every run.

The trainer image has two digests: of all but the code (its label tfcluster.dependencies, by which
it is current in development mode, where a run mounts trainer/ over the image's), and of every input
(tfcluster.inputs).
"""

import dataclasses
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from tfcluster.images.digest import DigestError, image_digests
from tfcluster.images.inputs import IMAGES
from tfcluster.setup.children import Children, CommandFailed
from tfcluster.setup.messages import SetupError, say
from tfcluster.setup.wheelhouse import PINS

TRAINER = "tfcluster:latest"
SHAPER = "tfcluster-shaper:latest"
# Compose warns that Bake needs buildx, which this client lacks; its own builder is used instead.
BAKE_WARNING = "configured to build using Bake"
# Each image's OCI title (docker/Dockerfile*), by which the untagged images a rebuild leaves are found.
TITLES = ("tfcluster", "tfcluster-shaper")


@dataclasses.dataclass(frozen=True)
class Wanted:
    """An image as this checkout would build it: its service in Compose's files, the label that
    says whether it is current, that label's value, and the build's variables."""

    service: str
    image: str
    label: str
    digest: str
    variables: dict[str, str]
    described: str  # For the line that says what is built.


def trainer(*, base: tuple[str, str], image: str, extra: str, dev: bool) -> Wanted:
    """The trainer image as wanted, on `base` (its name and id)."""
    dependencies, inputs = _digests(base[1], extra, "trainer")
    label, digest = ("tfcluster.dependencies", dependencies) if dev else ("tfcluster.inputs", inputs)
    variables = {"TFCLUSTER_INPUTS": inputs, "TFCLUSTER_DEPENDENCIES": dependencies}
    return Wanted("worker-0", image, label, digest, variables, f"the trainer image on {base[0]}")


def shaper(*, base: tuple[str, str]) -> Wanted:
    [inputs] = _digests(base[1], "", "shaper")
    variables = {"TFCLUSTER_SHAPER_INPUTS": inputs}
    return Wanted("shaper-0", SHAPER, "tfcluster.inputs", inputs, variables, f"the network shaper's on {base[0]}")


def _digests(base_id: str, extra: str, name: str) -> list[str]:
    inputs = IMAGES[name]
    try:
        return image_digests(base_id, extra, inputs.dependencies, inputs.code)
    except DigestError as error:
        raise SetupError(str(error)) from None


def labelled(children: Children, wanted: list[Wanted]) -> dict[str, tuple[str, str]]:
    """Each wanted image that is here, by its name: its id and the value of its label (one question
    to the engine for all of them)."""
    names = [image.image for image in wanted]
    found = children.run(
        ["docker", "image", "inspect", "--format", "{{.Id}} {{json .RepoTags}} {{json .Config.Labels}}", *names],
        check=False,
        capture=True,
    )
    here = {}
    for line in found.splitlines():
        fields = line.split(" ", 2)
        if len(fields) < 3:  # What the engine prints for a name it does not have.
            continue
        image_id, tags, labels = fields[0], json.loads(fields[1]) or [], json.loads(fields[2]) or {}
        for image in wanted:
            if image.image == image_id or tagged(image.image) in tags:
                here[image.image] = (image_id, labels.get(image.label, ""))
    return here


def tagged(name: str) -> str:
    """The name as the engine lists it among an image's tags: `:latest` when it names no tag."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def build(children: Children, wanted: list[Wanted], environ: dict[str, str], *, extra: str) -> None:
    """`docker compose build` of the services of `wanted`, then the untagged images the rebuild left."""
    variables = {**environ, **_provenance(children, extra)}
    for image in wanted:
        variables.update(image.variables)
    say(f"building {' and '.join(image.described for image in wanted)}")
    started = time.monotonic()
    command = ["docker", "compose", "-f", "compose.yaml", "-f", "compose.network.yaml", "build", "--quiet"]
    command += [image.service for image in wanted]
    process = children.start(command, env=variables, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stderr:  # Every line but the one warning.
            if BAKE_WARNING not in line:
                sys.stderr.write(line)
        status = process.wait()
    finally:
        children.finished(process)
    if status != 0:
        raise CommandFailed(command, status)
    say(f"built in {time.monotonic() - started:.0f} s")
    for title in TITLES:
        prune = ["docker", "image", "prune", "--force", "--filter", f"label=org.opencontainers.image.title={title}"]
        children.run(prune, stdout=subprocess.DEVNULL)


def _provenance(children: Children, extra: str) -> dict[str, str]:
    """Labels of where the image came from (docker/Dockerfile), not inputs: they change no layer."""
    revision = "unknown"
    try:
        revision = children.run(["git", "rev-parse", "HEAD"], capture=True).strip()
        # 1 is "there are changes"; any other failure says nothing of them.
        process = children.start(
            ["git", "diff", "--quiet", "HEAD"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            if process.wait() == 1:
                revision += "-dirty"
        finally:
            children.finished(process)
    except (CommandFailed, OSError):
        pass  # Not a git checkout, or no git.
    requirements = hashlib.sha256(PINS.read_bytes() + f"{extra}\n".encode()).hexdigest()
    return {"TFCLUSTER_REVISION": revision, "TFCLUSTER_REQUIREMENTS": requirements}


def record_id(wanted: Wanted, found: tuple[str, str] | None, file: Path) -> None:
    """The image's id into `file`, if its label (as `found`, after any build) is the one wanted:
    another checkout may have built the same name since."""
    if found is None:
        raise SetupError(f"the image {wanted.image} is not there after the set-up")
    if found[1] != wanted.digest:
        raise SetupError(
            f"the image {wanted.image} was rebuilt from other inputs while this set-up ran (another checkout's "
            "set-up?): run again, or give each checkout its own TFCLUSTER_IMAGE"
        )
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(f"{found[0]}\n", encoding="utf-8")

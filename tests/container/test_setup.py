"""scripts/setup builds an image only when it is not current: missing, or built from other inputs."""

import hashlib
import os
import subprocess

import pytest
from tfcluster.cluster.compose import unique_name

from tests.container.conftest import ROOT

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]


def setup(image: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ROOT / "scripts" / "setup")],
        cwd=ROOT,
        env={**os.environ, "TFCLUSTER_IMAGE": image},
        capture_output=True,
        text=True,
        timeout=240,
    )


def label(image: str, name: str = "tfcluster.inputs") -> str:
    inspected = subprocess.run(
        ["docker", "image", "inspect", "--format", f'{{{{index .Config.Labels "{name}"}}}}', image],
        capture_output=True,
        text=True,
        check=True,
    )
    return inspected.stdout.strip()


@pytest.fixture
def image(docker):
    """A tag of this test's own, removed afterwards whatever happened."""
    name = f"{unique_name('tfc-test')}:setup"
    yield name
    subprocess.run(["docker", "image", "rm", "--force", name], capture_output=True)


def test_an_image_is_built_when_missing_or_stale_and_left_alone_when_current(image):
    current = label("tfcluster:latest")  # The suite's own set-up made it current.
    assert len(current) == 64
    built = setup(image)  # Missing: built (from the cache, as tfcluster:latest was).
    assert built.returncode == 0, built.stderr
    assert "setup | building the trainer image" in built.stderr
    assert label(image) == current  # The same inputs, the same digest.
    again = setup(image)  # Current: the builder is not called at all.
    assert again.returncode == 0, again.stderr
    assert "building" not in again.stderr
    # An image with the name but from other inputs (an older checkout's, say) is rebuilt.
    stale = subprocess.run(
        ["docker", "build", "--quiet", "--label", "tfcluster.inputs=stale", "--tag", image, "-"],
        input=f"FROM {image}\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert stale.returncode == 0 and label(image) == "stale"
    rebuilt = setup(image)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "setup | building the trainer image" in rebuilt.stderr
    assert label(image) == current


def test_a_built_image_records_its_commit_and_its_requirements(image):
    built = setup(image)
    assert built.returncode == 0, built.stderr
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert label(image, "org.opencontainers.image.revision") in (head.stdout.strip(), head.stdout.strip() + "-dirty")
    requirements = (ROOT / "docker" / "requirements.txt").read_text() + "\n"  # Then EXTRA_REQUIREMENTS: none.
    assert label(image, "tfcluster.requirements") == hashlib.sha256(requirements.encode()).hexdigest()

"""Each image's inputs (tfcluster.images.inputs) are what its Dockerfile reads: no more, no fewer."""

import pytest
from tfcluster.images import digest, inputs

from tests.conftest import ROOT


@pytest.mark.parametrize("image", list(inputs.IMAGES))
def test_each_images_inputs_are_what_its_dockerfile_copies_and_mounts(image):
    listed = inputs.IMAGES[image]
    assert inputs.disagreements(listed, (ROOT / listed.dockerfile).read_text()) == []


def test_a_copy_left_out_of_the_list_or_a_listed_path_never_read_is_named():
    listed = inputs.IMAGES["shaper"]
    text = (ROOT / listed.dockerfile).read_text()
    copied = text.replace(
        "COPY trainer/shaper/ /app/trainer/shaper/",
        "COPY trainer/shaper/ /app/trainer/shaper/\nCOPY docker/Dockerfile.project /etc/",
    )
    assert inputs.disagreements(listed, copied) == [
        "docker/Dockerfile.shaper reads docker/Dockerfile.project, which is not among its inputs"
    ]
    dropped = text.replace("COPY trainer/shaper/ /app/trainer/shaper/\n", "")
    assert inputs.disagreements(listed, dropped) == [
        "trainer/shaper is an input of docker/Dockerfile.shaper, which reads nothing of it"
    ]


def test_bind_mounts_and_continued_lines_are_read_and_other_stages_are_not():
    text = (
        "FROM base AS build\nRUN --mount=type=bind,source=docker/wheels,target=/wheels \\\n"
        "    --mount=type=bind,target=/r.txt,source=docker/requirements.txt pip install\n"
        "COPY --from=build /opt/venv /opt/venv\nCOPY --chown=0:0 a.py b/ /app/\n"
    )
    assert inputs.read_by_build(text) == {"docker/wheels", "docker/requirements.txt", "a.py", "b"}


@pytest.mark.parametrize("image", list(inputs.IMAGES))
def test_digest_by_image_name_is_the_digest_of_its_paths_as_setup_gave_them_before(image, monkeypatch, capsys):
    # So an image built before setup named its inputs by image is still current.
    monkeypatch.chdir(ROOT)
    listed = inputs.IMAGES[image]
    code = [argument for path in listed.code for argument in ("--code", path)]
    assert digest.main(["--base-id", "sha256:base", "--image", image]) == 0
    by_name = capsys.readouterr().out
    assert digest.main(["--base-id", "sha256:base", *code, "--", *listed.dependencies]) == 0
    assert by_name == capsys.readouterr().out and len(by_name.split()) == (2 if listed.code else 1)

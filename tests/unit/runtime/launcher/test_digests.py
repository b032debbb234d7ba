"""The digests the rendezvous compares: a project's files and the installed packages."""

import os
import shutil

import pytest

from trainer.launcher import digests
from trainer.launcher.digests import Digest, installed_packages, packages_digest, project_digest


@pytest.fixture
def project(tmp_path):
    """A small project: a script, a package, and what a run leaves behind that is no code."""
    root = tmp_path / "project"
    (root / "model").mkdir(parents=True)
    (root / "train.py").write_text("import model\n")
    (root / "model" / "__init__.py").write_text("RATE = 0.1\n")
    return root


def test_the_digest_of_a_project_is_stable_and_does_not_depend_on_where_it_is(project, tmp_path):
    first = project_digest(str(project))
    assert project_digest(str(project)) == first
    shutil.copytree(project, tmp_path / "elsewhere")
    assert project_digest(str(tmp_path / "elsewhere")) == first
    assert first.summary == "2 files, 24 bytes"
    assert str(first) == f"{first.sha256[:12]} (2 files, 24 bytes)"


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "model" / "__init__.py").write_text("RATE = 0.2\n"),  # Same size, new content.
        lambda root: (root / "model" / "layers.py").write_text(""),  # A file added, even an empty one.
        lambda root: (root / "train.py").rename(root / "main.py"),
        lambda root: (root / "train.py").unlink(),
        lambda root: (root / "model" / "link.py").symlink_to("../train.py"),
    ],
    ids=["changed", "added", "renamed", "removed", "linked"],
)
def test_the_digest_changes_with_any_file(project, change):
    before = project_digest(str(project))
    change(project)
    assert project_digest(str(project)).sha256 != before.sha256


def test_caches_repositories_virtual_environments_and_empty_folders_are_no_part_of_the_project(project):
    before = project_digest(str(project))
    for folder in ("__pycache__", "model/__pycache__", ".git/objects", ".venv/lib", "outputs/empty"):
        (project / folder).mkdir(parents=True)
    (project / "model" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0compiled")
    (project / ".git" / "objects" / "ab").write_text("a commit")
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (project / ".venv" / "lib" / "site.py").write_text("")
    assert project_digest(str(project)) == before


def test_a_symbolic_link_counts_by_where_it_points_and_is_never_followed(project, tmp_path):
    (tmp_path / "outside.py").write_text("one")
    (project / "shared.py").symlink_to(tmp_path / "outside.py")
    before = project_digest(str(project))
    (tmp_path / "outside.py").write_text("two")
    assert project_digest(str(project)) == before


def test_a_large_file_counts_by_its_size_only(project, monkeypatch):
    monkeypatch.setattr(digests, "LARGE_FILE", 100)
    weights = project / "weights.bin"
    weights.write_bytes(b"a" * 1000)
    before = project_digest(str(project))
    weights.write_bytes(b"b" * 1000)
    assert project_digest(str(project)) == before  # Read whole, it would differ; it is not read.
    weights.write_bytes(b"b" * 1001)
    assert project_digest(str(project)) != before
    assert project_digest(str(project)).summary == "3 files, 1025 bytes"


def test_a_directory_that_holds_data_rather_than_code_is_refused_with_a_reason(project, monkeypatch):
    monkeypatch.setattr(digests, "PROJECT_READ_LIMIT", 20)
    with pytest.raises(ValueError) as raised:
        project_digest(str(project))
    assert str(raised.value) == (
        "holds more than 0 MiB in files of up to 16 MiB (train.py is past it): the launcher compares "
        "every worker's project files, so keep data sets out of the project directory"
    )
    monkeypatch.setattr(digests, "PROJECT_READ_LIMIT", 2**20)
    monkeypatch.setattr(digests, "PROJECT_FILE_LIMIT", 1)
    with pytest.raises(ValueError, match=r"^holds more than 1 files: the launcher compares"):
        project_digest(str(project))


def test_a_project_that_is_no_directory_is_refused(tmp_path):
    with pytest.raises(ValueError, match="^is not a directory$"):
        project_digest(str(tmp_path / "nothing"))
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="^is not a directory$"):
        project_digest(str(tmp_path / "file"))


def test_a_file_the_launcher_may_not_read_counts_as_unreadable(project, monkeypatch):
    secret = project / "secret.txt"
    secret.write_text("one")

    def refuse_the_secret(path, *arguments, **keywords):
        if os.path.basename(path) == "secret.txt":
            raise PermissionError(path)  # As for a file of another user's, mode 600 (root reads all).
        return open(path, *arguments, **keywords)

    monkeypatch.setattr(digests, "open", refuse_the_secret, raising=False)
    before = project_digest(str(project))
    secret.write_text("two")
    assert project_digest(str(project)) == before
    secret.write_text("three")
    assert project_digest(str(project)) != before  # Its size still counts.


def test_the_packages_digest_is_of_names_and_versions_in_any_order():
    first = packages_digest(["numpy==1.26.4", "tensorflow==2.16.1"])
    assert packages_digest(["tensorflow==2.16.1", "numpy==1.26.4"]) == first
    assert packages_digest(["numpy==1.26.4", "tensorflow==2.16.2"]).sha256 != first.sha256
    assert first.summary == "2 packages"


def test_the_installed_packages_are_read_from_their_metadata_without_importing_them():
    installed = installed_packages()
    assert installed == sorted(installed)
    assert any(package.startswith("pytest==") for package in installed)
    assert packages_digest() == packages_digest(installed)


def test_a_digest_travels_as_a_record():
    digest = Digest(sha256="ab" * 32, summary="3 files, 10 bytes")
    assert Digest.from_record(digest.to_record()) == digest
    assert Digest.from_record(None) is None


# -- the image and the training command ----------------------------------------------------------


@pytest.fixture
def image(tmp_path):
    """A stand-in for an image: the launcher's package, and the release files of its OS."""
    package = tmp_path / "app" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""The package."""\n')
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "os-release").write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n')
    (etc / "debian_version").write_text("12.11\n")
    return package, (str(etc / "os-release"), str(etc / "debian_version"))


def test_the_image_digest_names_the_code_and_the_release(image):
    package, releases = image
    first = digests.image_digest(str(package), releases)
    assert first == digests.image_digest(str(package), releases)
    assert first.summary == "trainer code 1 files, 19 bytes; Debian GNU/Linux 12 (bookworm) 12.11"
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert digests.image_digest(str(package), releases) == first  # Bytecode is no part of the code.


@pytest.mark.parametrize(
    "change",
    [
        lambda package, etc: (package / "__init__.py").write_text('"""The other."""\n'),
        lambda package, etc: (package / "extra.py").write_text(""),
        lambda package, etc: (etc / "debian_version").write_text("12.12\n"),
        lambda package, etc: (etc / "os-release").write_text('PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\n'),
        lambda package, etc: (etc / "debian_version").unlink(),
    ],
    ids=["code changed", "code added", "point release", "release", "release file gone"],
)
def test_the_image_digest_changes_with_the_code_or_the_release(image, change):
    package, releases = image
    before = digests.image_digest(str(package), releases)
    change(package, package.parents[1] / "etc")
    assert digests.image_digest(str(package), releases).sha256 != before.sha256


def test_an_image_without_release_files_says_so(image, tmp_path):
    package, _ = image
    assert digests.image_digest(str(package), [str(tmp_path / "none")]).summary.endswith("; unknown OS release")


def test_the_command_digest_covers_its_words_and_the_files_they_name(tmp_path):
    (tmp_path / "train.py").write_text("rate = 0.1\n")
    (tmp_path / "data").mkdir()
    first = digests.command_digest(["python", "train.py", "--data", "data", "--missing", "nothing.py"], str(tmp_path))
    assert first.summary == "6 words, 1 file it names"  # Not the folder, nor a word naming nothing.
    assert str(first) == f"{first.sha256[:12]} (6 words, 1 file it names)"
    again = digests.command_digest(["python", "train.py", "--data", "data", "--missing", "nothing.py"], str(tmp_path))
    assert again == first
    assert digests.command_digest(["python", "train.py"], str(tmp_path)) != first
    before = digests.command_digest(["python", "train.py"], str(tmp_path))
    (tmp_path / "train.py").write_text("rate = 0.2\n")  # Same size, other content.
    assert digests.command_digest(["python", "train.py"], str(tmp_path)) != before
    absolute = digests.command_digest(["python", str(tmp_path / "train.py")], "/")
    assert absolute.summary == "2 words, 1 file it names"


def test_files_of_folders_compared_otherwise_are_not_read_again(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("rate = 0.1\n")
    covered = digests.command_digest(["python", "train.py"], str(project), covered=[str(project), ""])
    assert covered.summary == "2 words"
    (project / "train.py").write_text("rate = 0.2\n")  # The project digest tells this change, not this one.
    assert digests.command_digest(["python", "train.py"], str(project), covered=[str(project)]) == covered


def test_a_command_not_compared_shows_as_such():
    assert str(digests.UNCOMPARED_COMMAND) == "(not compared: TFCLUSTER_COMPARE_COMMAND=0)"

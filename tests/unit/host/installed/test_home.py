"""The installed root (tfcluster/home.py): the wheel's files copied to the user's cache, checkout-
shaped, brought up to date when the installed files change, the state there kept."""

import os

import pytest
from tfcluster import home


@pytest.fixture
def package(tmp_path):
    """An installed package as the wheel lays it out: its modules, and _home beside them."""
    package = tmp_path / "site-packages" / "tfcluster"
    (package / "cluster" / "__pycache__").mkdir(parents=True)
    (package / "paths.py").write_text("ROOT = None\n")
    (package / "cluster" / "__pycache__" / "api.cpython-311.pyc").write_bytes(b"\0")
    (package / "_home" / "scripts").mkdir(parents=True)
    (package / "_home" / "scripts" / "run").write_text("#!/usr/bin/env bash\n")
    (package / "_home" / "compose.yaml").write_text("name: tfcluster\n")
    for path in (package / "_home" / "scripts" / "run", package / "paths.py"):
        path.chmod(0o644)  # As an install may leave it.
    return package


def test_the_copy_is_checkout_shaped_without_bytecode_and_its_scripts_are_executable(package, tmp_path):
    target = home.synced(package, tmp_path / "home")
    assert target == tmp_path / "home"
    assert (target / "compose.yaml").read_text() == "name: tfcluster\n"
    assert (target / "scripts" / "tfcluster" / "paths.py").read_text() == "ROOT = None\n"
    assert not list(target.rglob("*.pyc"))
    assert os.access(target / "scripts" / "run", os.X_OK)
    assert not os.access(target / "scripts" / "tfcluster" / "paths.py", os.X_OK)


def test_an_unchanged_install_is_not_copied_again_and_a_changed_one_is(package, tmp_path):
    target = home.synced(package, tmp_path / "home")
    copied = (target / "compose.yaml").stat().st_ino
    home.synced(package, target)
    assert (target / "compose.yaml").stat().st_ino == copied
    (package / "_home" / "compose.yaml").write_text("name: tfcluster\nservices: {}\n")
    home.synced(package, target)
    assert (target / "compose.yaml").read_text() == "name: tfcluster\nservices: {}\n"


def test_a_file_the_new_version_has_not_goes_and_the_state_stays(package, tmp_path):
    target = home.synced(package, tmp_path / "home")
    (target / "docker" / "wheels").mkdir(parents=True)
    (target / "docker" / "wheels" / "tensorflow_cpu-2.20.0.whl").write_bytes(b"wheel")
    (target / ".env").write_text("BASE_IMAGE=tfcluster-base:bookworm-slim\n")
    (package / "_home" / "scripts" / "run").unlink()
    home.synced(package, target)
    assert not (target / "scripts" / "run").exists()
    assert (target / "docker" / "wheels" / "tensorflow_cpu-2.20.0.whl").read_bytes() == b"wheel"
    assert (target / ".env").read_text() == "BASE_IMAGE=tfcluster-base:bookworm-slim\n"


def test_the_copy_goes_to_TFCLUSTER_HOME_else_the_users_cache(tmp_path):
    assert home.location({"TFCLUSTER_HOME": str(tmp_path / "mine")}) == tmp_path / "mine"
    assert home.location({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "tfcluster" / "home"
    assert home.location({"HOME": "/nonexistent"}).parts[-2:] == ("tfcluster", "home")


def test_the_root_is_the_copy_when_installed_else_the_checkout_whatever_of_it_is_there(package, tmp_path, monkeypatch):
    monkeypatch.setenv("TFCLUSTER_HOME", str(tmp_path / "copy"))
    assert home.root_of(package) == tmp_path / "copy"
    assert (tmp_path / "copy" / "compose.yaml").is_file()
    # A checkout, or the part of one a command needs (scripts/ and trainer/, no compose.yaml).
    checkout = tmp_path / "checkout"
    (checkout / "scripts" / "tfcluster").mkdir(parents=True)
    assert home.root_of(checkout / "scripts" / "tfcluster") == checkout

"""A warm run's `docker compose config`, kept until something Compose reads changes: each such
change resolves it again; nothing else does."""

import pytest
from tfcluster.cluster import configcache


class Resolver:
    def __init__(self):
        self.calls = 0

    def __call__(self) -> dict:
        self.calls += 1
        return {"services": {"worker-0": {"environment": {"CALL": str(self.calls)}}}}


@pytest.fixture
def checkout(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "compose.yaml").write_text("services:\n  worker-0: {}\n")
    (root / "compose.workers.yaml").write_text("services:\n  worker-2:\n    extends:\n      file: base.yaml\n")
    (root / "base.yaml").write_text("services: {}\n")
    (root / ".env").write_text("BASE_IMAGE=one\n")
    (root / "mine.env").write_text("BATCH=64\n")
    environment = {
        "COMPOSE_FILE": "compose.yaml:compose.workers.yaml",
        "COMPOSE_PROJECT_NAME": "p",
        "TFCLUSTER_ENV_FILE": "mine.env",
        "HOME": str(tmp_path),
    }
    return root, environment


def config(root, environment, resolve):
    return configcache.cached(root / ".tfcluster" / "config.json", environment, root, resolve)


def test_an_unchanged_run_is_not_resolved_again(checkout):
    root, environment = checkout
    resolve = Resolver()
    first = config(root, environment, resolve)
    assert config(root, dict(environment), resolve) == first
    assert resolve.calls == 1


@pytest.mark.parametrize(
    "change",
    ["compose.yaml", "compose.workers.yaml", "base.yaml", ".env", "mine.env", "variable", "new variable", "files"],
)
def test_a_change_of_anything_compose_reads_resolves_it_again(checkout, change):
    root, environment = checkout
    resolve = Resolver()
    config(root, environment, resolve)
    if change == "variable":
        environment["COMPOSE_PROJECT_NAME"] = "q"
    elif change == "new variable":
        environment["TRAIN_EPOCHS"] = "5"
    elif change == "files":
        environment["COMPOSE_FILE"] = "compose.yaml"
    else:
        with (root / change).open("a") as file:
            file.write("# changed\n")
    assert config(root, environment, resolve)["services"]["worker-0"]["environment"] == {"CALL": "2"}
    assert config(root, environment, resolve)["services"]["worker-0"]["environment"] == {"CALL": "2"}


def test_the_same_files_in_another_folder_are_resolved_there(checkout, tmp_path):
    root, environment = checkout
    resolve = Resolver()
    config(root, environment, resolve)
    moved = tmp_path / "moved"
    root.rename(moved)
    config(moved, environment, resolve)
    assert resolve.calls == 2


def test_an_env_file_that_appears_or_a_kept_result_that_is_not_whole_resolves_it_again(checkout):
    root, environment = checkout
    environment["TFCLUSTER_ENV_FILE"] = "later.env"
    resolve = Resolver()
    config(root, environment, resolve)
    (root / "later.env").write_text("X=1\n")
    config(root, environment, resolve)
    (root / ".tfcluster" / "config.json").write_text('{"key": ')
    config(root, environment, resolve)
    assert resolve.calls == 3

"""The set-up's small decisions: Compose's version, pip's error line, .env's lines, the pinned download."""

import pytest
from tfcluster.setup import bases, compose, wheelhouse


@pytest.mark.parametrize(
    ("printed", "version"),
    [
        ("2.40.3\n", (2, 40, 3)),
        ("v2.24.4-desktop.1", (2, 24, 4)),
        ("2.3", None),
        ("", None),
        ("docker: 'compose' is not", None),
    ],
)
def test_composes_version_is_read_as_docker_compose_version_short_prints_it(printed, version):
    assert compose.version_of(printed) == version


def test_the_oldest_compose_that_reads_these_files_is_the_minimum():
    assert (
        compose.version_of("2.24.3") < compose.MINIMUM <= compose.version_of("2.24.4") < compose.version_of("2.100.0")
    )


def test_pips_first_error_line_without_its_prefix_or_its_list_of_versions():
    output = (
        "Collecting pandas==9.9\n"
        "ERROR: Could not find a version that satisfies the requirement pandas==9.9 (from versions: 1.0, 2.0)\n"
        "ERROR: No matching distribution found for pandas==9.9\n"
    )
    assert wheelhouse.first_error(output) == "Could not find a version that satisfies the requirement pandas==9.9"
    assert wheelhouse.first_error("some output\nthe last words\n\n") == "the last words"
    assert wheelhouse.first_error("") == ""


def test_remember_replaces_its_variables_line_and_keeps_the_others(tmp_path):
    env_file = tmp_path / ".env"
    bases.remember(env_file, "BASE_IMAGE", "one")
    assert env_file.read_text() == "BASE_IMAGE=one\n"
    env_file.write_text("MINE=1\nBASE_IMAGE=one\nOTHER=2")
    bases.remember(env_file, "BASE_IMAGE", "two")
    assert env_file.read_text() == "MINE=1\nOTHER=2\nBASE_IMAGE=two\n"
    stamp = env_file.stat().st_mtime_ns
    bases.remember(env_file, "BASE_IMAGE", "two")  # Already so: not written.
    assert env_file.stat().st_mtime_ns == stamp


def test_the_pinned_wheels_are_downloaded_for_the_images_platform_each_against_its_hash():
    command = wheelhouse.pinned_command()
    assert command[command.index("-r") + 1] == "docker/requirements.txt"
    assert "--require-hashes" in command and "--no-deps" in command
    assert command[command.index("--python-version") + 1] == "3.11"
    assert all(command[index + 1].endswith("_x86_64") for index, word in enumerate(command) if word == "--platform")


class Asked:
    """The set-up's children as `choose` uses them: each pull noted, and answered as given."""

    def __init__(self, pulls: bool):
        self.pulls = pulls
        self.pulled: list[str] = []

    def succeeds(self, command: list[str]) -> bool:
        self.pulled.append(command[-1])
        return self.pulls


@pytest.mark.parametrize(
    ("here", "pulls", "chosen", "pulled", "built"),
    [
        ({"online"}, False, "online", [], []),
        # Built before, when the registry could not be reached: not asked again at every run.
        ({"offline"}, True, "offline", [], []),
        ({"online", "offline"}, False, "online", [], []),
        (set(), True, "online", ["online"], []),
        (set(), False, "offline", ["online"], ["offline"]),
    ],
)
def test_the_base_is_the_standard_one_if_here_else_the_one_built_here_else_pulled_else_built(
    monkeypatch, here, pulls, chosen, pulled, built
):
    base = bases.Base("BASE_IMAGE", "online", "offline", ("python3",))
    children, made = Asked(pulls), []

    def ids(_children, names):  # What the engine has: what was here, pulled or built.
        have = here | set(made) | (set(children.pulled) if pulls else set())
        return {name: f"id-{name}" for name in names if name in have}

    monkeypatch.setattr(bases, "ids", ids)
    monkeypatch.setattr(bases, "build", lambda base, _children: made.append(base.offline))
    assert bases.choose(base, children)[:2] == (chosen, f"id-{chosen}")
    assert children.pulled == pulled
    assert made == built

"""tfcluster.images.digest: the digest of an image's build inputs, the same as scripts/setup's bash
computed before it moved here (kept below, and compared), so that no image is rebuilt for the move."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tfcluster.images import digest

from tests.conftest import ROOT

BASE_ID = "sha256:" + "0123456789abcdef" * 4
# scripts/setup's inputs_digest and files_digest before the move, verbatim; `docker` stands in for
# the engine's `docker image inspect --format '{{.Id}}'`. Then as its main used them.
OLD_BASH = r"""
set -euo pipefail
docker() { echo "$BASE_ID"; }
inputs_digest() {
  local base=$1
  shift
  {
    docker image inspect --format '{{.Id}}' "$base"
    echo "EXTRA_REQUIREMENTS=${EXTRA_REQUIREMENTS:-}"
    files_digest "$@"
  } | sha256sum | cut -d' ' -f1
}
files_digest() {
  find "$@" -type f ! -name '*.whl' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 -r sha256sum
  find "$@" -type f -name '*.whl' -printf '%p %s\n' | sort
}
dependencies=$(inputs_digest base "$@")
inputs=$( { echo "$dependencies"; files_digest code; } | sha256sum | cut -d' ' -f1)
echo "$dependencies $inputs"
"""
INPUTS = [".dockerignore", "docker/Dockerfile", "docker/wheels", "docker/extra-wheels", "code/one.py"]
TOOLS = ["bash", "find", "sort", "xargs", "sha256sum", "cut"]


@pytest.fixture
def tree(tmp_path) -> Path:
    """A build context like the project's, with names that sort differently by bytes and by a
    locale's collation, a wheel, __pycache__, links and a backslash."""
    files = {
        ".dockerignore": "*\n",
        "docker/Dockerfile": "FROM base\n",
        "docker/wheels/.gitkeep": "",
        "docker/wheels/six-1.17.0-py2.py3-none-any.whl": "a wheel",
        "docker/wheels/Tf_Keras-2.21.0-py3-none-any.whl": "another wheel",
        "docker/extra-wheels/.gitkeep": "",
        "code/one.py": "1",
        "code/__init__.py": "",
        "code/_private.py": "p",
        "code/Upper.py": "U",
        "code/a b/spaced name.py": "s",
        "code/sub/deep/deeper.py": "d",
        "code/sub/__pycache__/deeper.cpython-311.pyc": "compiled",
        "code/back\\slash.py": "b",
        "code/café.py": "é",
    }
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
    (tmp_path / "code" / "empty").mkdir()
    (tmp_path / "code" / "link.py").symlink_to("one.py")
    (tmp_path / "code" / "linked").symlink_to("sub")
    return tmp_path


def python_digests(tree: Path, extra: str, locale: dict[str, str]) -> str:
    """The command line's answer, `DEPENDENCIES INPUTS`, in `tree` (the code in code/) under `locale`."""
    environment = {**os.environ, "PYTHONPATH": f"{ROOT / 'scripts'}:{ROOT}", **locale}
    command = [sys.executable, "-m", "tfcluster.images", "digest", "--base-id", BASE_ID]
    command += [f"--extra-requirements={extra}", "--code", "code", "--", *INPUTS]
    result = subprocess.run(command, cwd=tree, env=environment, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def bash_digests(tree: Path, extra: str, locale: dict[str, str]) -> str:
    environment = {**os.environ, "BASE_ID": BASE_ID, "EXTRA_REQUIREMENTS": extra, **locale}
    command = ["bash", "-c", OLD_BASH, "bash", *INPUTS]
    result = subprocess.run(command, cwd=tree, env=environment, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def locale_environment(name: str, tmp_path_factory) -> dict[str, str]:
    """The environment of the locale `name`, made with localedef in a folder of its own (LOCPATH)
    when the machine has its source but not it; skips the test if it cannot be had."""
    if name == "C" or name.lower().replace("-", "") in installed_locales():
        return {"LC_ALL": name}
    language, _, charset = name.partition(".")
    if not shutil.which("localedef") or not Path(f"/usr/share/i18n/locales/{language}").exists():
        pytest.skip(f"no {name} locale, nor localedef and its source to make it")
    folder = tmp_path_factory.mktemp("locales")
    subprocess.run(["localedef", "-i", language, "-f", charset, str(folder / name)], capture_output=True, check=False)
    if not (folder / name).is_dir():
        pytest.skip(f"localedef could not make {name}")
    return {"LC_ALL": name, "LOCPATH": str(folder)}


# C; C.UTF-8, whose sort is by code points; en_US.UTF-8, whose sort is not by bytes (it puts
# `.dockerignore` after `docker/`, ignoring punctuation at first).
@pytest.fixture(scope="module", params=["C", "C.UTF-8", "en_US.UTF-8"])
def locale(request, tmp_path_factory) -> dict[str, str]:
    return locale_environment(request.param, tmp_path_factory)


def installed_locales() -> set[str]:
    listed = subprocess.run(["locale", "-a"], capture_output=True, text=True) if shutil.which("locale") else None
    return {name.lower().replace("-", "") for name in (listed.stdout.split() if listed else [])}


@pytest.mark.skipif(not all(shutil.which(tool) for tool in TOOLS), reason="needs bash, coreutils and findutils")
@pytest.mark.parametrize("extra", ["", "pandas==2.2.3 tqdm", "-n --weird \\ 'quoted'"])
def test_the_digests_are_those_of_scripts_setups_bash_before(tree, locale, extra):
    python = python_digests(tree, extra, locale)
    assert python == bash_digests(tree, extra, locale)
    assert len(python.split()) == 2


def test_the_order_is_the_locales_collation_as_sorts(tree, tmp_path_factory):
    # The fixture's names sort otherwise by en_US.UTF-8's collation than by bytes: the digests differ.
    en_us = locale_environment("en_US.UTF-8", tmp_path_factory)
    assert python_digests(tree, "", en_us) != python_digests(tree, "", {"LC_ALL": "C"})


def inputs(tree: Path, extra: str = "") -> str:
    return digest.inputs_digest(BASE_ID, extra, [str(tree / name) for name in INPUTS])


def test_the_digest_is_stable_and_says_the_base_and_extra_requirements(tree):
    first = inputs(tree)
    assert inputs(tree) == first
    assert digest.inputs_digest(BASE_ID.replace("0", "1"), "", [str(tree / name) for name in INPUTS]) != first
    assert inputs(tree, "tqdm") != first


@pytest.mark.parametrize("name", [".dockerignore", "docker/Dockerfile", "code/one.py", "docker/extra-wheels/.gitkeep"])
def test_the_digest_changes_when_a_files_content_changes(tree, name):
    before = inputs(tree)
    (tree / name).write_text((tree / name).read_text() + "changed")
    assert inputs(tree) != before


def test_a_file_added_or_renamed_changes_the_digest(tree):
    before = inputs(tree)
    (tree / "docker" / "extra-wheels" / "new.txt").write_text("")
    added = inputs(tree)
    (tree / "docker" / "extra-wheels" / "new.txt").rename(tree / "docker" / "extra-wheels" / "renamed.txt")
    assert len({before, added, inputs(tree)}) == 3


def test_pycache_is_left_out(tree):
    lines = digest.files_lines([str(tree / "code")])
    before = digest.code_digest("d", [str(tree / "code")])
    (tree / "code" / "sub" / "__pycache__" / "deeper.cpython-311.pyc").write_text("recompiled")
    (tree / "code" / "__pycache__").mkdir()
    (tree / "code" / "__pycache__" / "new.pyc").write_text("new")
    assert digest.code_digest("d", [str(tree / "code")]) == before
    assert b"__pycache__" not in lines


def test_a_wheel_counts_by_its_name_and_size_not_its_content(tree):
    wheel = tree / "docker" / "wheels" / "six-1.17.0-py2.py3-none-any.whl"
    before = inputs(tree)
    wheel.write_text("A WHEEL")  # Other bytes, the same size.
    assert inputs(tree) == before
    wheel.write_text("a bigger wheel")
    bigger = inputs(tree)
    assert f"{wheel} 14\n".encode() in digest.files_lines([str(tree / "docker" / "wheels")])
    wheel.rename(wheel.with_name("six-1.17.1-py2.py3-none-any.whl"))
    assert len({before, bigger, inputs(tree)}) == 3


def test_the_lines_are_sha256sums_then_the_wheels_each_sorted_by_bytes_in_the_c_locale(tree, monkeypatch):
    monkeypatch.chdir(tree)

    def checksum(name: str) -> str:
        return f"{hashlib.sha256((tree / name).read_bytes()).hexdigest()}  {name}"

    # Bytes' order, as sort's in the C locale: a dot, upper case, `_`, then lower case. Neither
    # links, nor __pycache__, nor an empty folder; a name with a backslash escaped, as sha256sum does.
    assert digest.files_lines(["code", "docker/wheels", ".dockerignore"]).decode().splitlines() == [
        checksum(".dockerignore"),
        checksum("code/Upper.py"),
        checksum("code/__init__.py"),
        checksum("code/_private.py"),
        checksum("code/a b/spaced name.py"),
        "\\" + checksum("code/back\\slash.py").replace("back\\slash", "back\\\\slash"),
        checksum("code/café.py"),
        checksum("code/one.py"),
        checksum("code/sub/deep/deeper.py"),
        checksum("docker/wheels/.gitkeep"),
        "docker/wheels/Tf_Keras-2.21.0-py3-none-any.whl 13",
        "docker/wheels/six-1.17.0-py2.py3-none-any.whl 7",
    ]


def test_links_are_neither_followed_nor_taken_and_paths_are_named_as_given(tree, monkeypatch):
    monkeypatch.chdir(tree)
    names = [line.split("  ", 1)[1] for line in digest.files_lines(["code/", "code/sub"]).decode().splitlines()]
    assert "code/link.py" not in names and not any(name.startswith("code/linked") for name in names)
    assert names.count("code/sub/deep/deeper.py") == 2  # Once for each path it is under, as find's.
    assert "code/one.py" in names and "code//one.py" not in names


def test_a_name_with_a_backslash_or_newline_is_escaped_as_sha256sum_does():
    assert digest.checksum_line("ab", "plain name") == "ab  plain name\n"
    assert digest.checksum_line("ab", "back\\slash\nnew\rline") == "\\ab  back\\\\slash\\nnew\\rline\n"


def test_an_input_that_is_not_there_is_named(tree):
    with pytest.raises(digest.DigestError, match=r"^.*/no/such: No such file or directory \(an input"):
        digest.inputs_digest(BASE_ID, "", [str(tree / "code"), str(tree / "no" / "such")])
    environment = {**os.environ, "PYTHONPATH": f"{ROOT / 'scripts'}:{ROOT}"}
    command = [sys.executable, "-m", "tfcluster.images", "digest", "--base-id", BASE_ID, "--", "code", "no/such"]
    result = subprocess.run(command, cwd=tree, env=environment, capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "no/such: No such file or directory (an input of the image's build)\n"

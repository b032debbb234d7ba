"""What code and docs point at exists: every repository path, Markdown link and cited section.

A file moved or a heading renamed leaves references behind in comments, docstrings and docs,
which nothing else would notice. The files scanned are git's (tracked, and new ones not yet
added, but not those git ignores): the Markdown, Python, YAML, Dockerfiles, the host scripts and
the workflows. In them:

- a path inside the repository (starting with one of `PREFIXES`, or a Compose file) must be a
  file or a folder of the repository, or an output git ignores (`compose.workers.yaml`);
- a Markdown link to a local file must lead to one, and its `#anchor` to one of its headings;
- a section cited as `FILE.md, "Section"` must be a heading of FILE.md;
- no file names FACTS.md, which lives outside the repository.

This file is left out of the scans: its examples of broken references are broken on purpose.
"""

import fnmatch
import os
import re
import subprocess
from pathlib import Path

from tfcluster.cluster import devmode, slowdown
from tfcluster.cluster.plan import WORKERS_FILE

from tests.conftest import ROOT

SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()
SCANNED = ("*.md", "*.py", "*.yaml", "*.yml", "*Dockerfile*", "scripts/*", ".github/workflows/*", ".ci/*")
PREFIXES = ("trainer", "scripts", "docs", "docker", "tests", "examples")
# Not preceded by what would make it part of a longer path or name (`/app/trainer/`, `.venv/`, `$X/`).
PATH = re.compile(rf"(?<![\w./$-])((?:{'|'.join(PREFIXES)})/[\w.*/-]*|compose(?:\.[\w*-]+)?\.yaml)")
# GitHub names that share a folder's prefix but are no path here; those followed by `#` (an issue)
# or `@` (an action's version) are recognised by that alone.
GITHUB_NAMES = {"docker/compose", "docker/build-push"}  # The second: the start of build-push-action's name.
CITATION = re.compile(r'([\w./-]+\.md)\)?, "([^"\n]+)"')
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
OUTSIDE = "FACTS.md"
# Where a run writes its generated Compose files (scripts/tfcluster/cluster/runs.py), for any run's
# name, and which they are.
RUN_FOLDER = ".tfcluster/runs/NAME"
RUN_WRITES = {WORKERS_FILE, devmode.DEV_FILE, slowdown.SLOW_FILE}


def repository_files() -> list[str]:
    """Every file git knows or would add, as paths from the root; none that git ignores."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return sorted({name for name in listed if (ROOT / name).is_file()})


FILES = repository_files()
FOLDERS = {parent.as_posix() for name in FILES for parent in Path(name).parents if parent != Path(".")}


def text_of(name: str) -> str | None:
    try:
        return (ROOT / name).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None  # An image or another binary file.


def scanned_files() -> list[str]:
    return [name for name in FILES if name != SELF and any(fnmatch.fnmatch(name, glob) for glob in SCANNED)]


def exists(path: str) -> bool:
    """Whether `path` (from the root; a glob is allowed) is a file or folder, or an output git
    ignores: at the root, or a Compose file a run writes into its own folder (.tfcluster/runs/NAME/)."""
    path = path.rstrip("/")
    if "*" in path:
        return any(fnmatch.fnmatch(name, path) for name in [*FILES, *FOLDERS])
    if path in FILES or path in FOLDERS:
        return True
    candidates = [path, *([f"{RUN_FOLDER}/{path}"] if path in RUN_WRITES else [])]
    return any(
        subprocess.run(["git", "check-ignore", "--quiet", candidate], cwd=ROOT, check=False).returncode == 0
        for candidate in candidates
    )


def paths_in(text: str) -> list[str]:
    """The repository paths `text` names, without GitHub references or a sentence's closing dot."""
    found = []
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if text[match.end() : match.end() + 1] in ("#", "@") or path in GITHUB_NAMES:
            continue
        found.append(path)
    return found


def headings(text: str) -> list[str]:
    """The Markdown headings of `text`, outside fenced code blocks."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            found.append(match.group(1))
    return found


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def resolve(citing: str, target: str) -> str | None:
    """A Markdown file named in `citing`: from the citing file's folder (as a link is), else the root."""
    for base in (Path(citing).parent.as_posix(), "."):
        candidate = os.path.normpath(os.path.join(base, target))
        if candidate in FILES:
            return candidate
    return None


def missing_paths(name: str, text: str) -> list[str]:
    return [f"{name}: {path}" for path in paths_in(text) if not exists(path)]


def broken_citations(name: str, text: str) -> list[str]:
    found = []
    for match in CITATION.finditer(text):
        target, section = match.groups()
        cited = resolve(name, target)
        if cited is None:
            found.append(f'{name}: {target}, "{section}": no such file')
        elif section not in headings(text_of(cited) or ""):
            found.append(f'{name}: {target}, "{section}": no such heading in {cited}')
    return found


def broken_links(name: str, text: str) -> list[str]:
    found = []
    for match in LINK.finditer(text):
        target, _, fragment = match.group(1).partition("#")
        if re.match(r"[a-z]+:", target):
            continue  # A web address.
        linked = resolve(name, target) if target else name
        if linked is None and target and exists((Path(name).parent / target).as_posix()):
            continue  # A folder, an image or another file without headings.
        if linked is None:
            found.append(f"{name}: ({match.group(1)}): no such file")
        elif fragment and linked.endswith(".md") and fragment not in map(anchor, headings(text_of(linked) or "")):
            found.append(f"{name}: ({match.group(1)}): no such heading in {linked}")
    return found


def test_every_repository_path_named_in_code_and_docs_exists():
    found = [problem for name in scanned_files() for problem in missing_paths(name, text_of(name) or "")]
    assert found == []


def test_every_cited_section_is_a_heading_of_its_file():
    found = [problem for name in scanned_files() for problem in broken_citations(name, text_of(name) or "")]
    assert found == []


def test_every_local_markdown_link_leads_to_a_file_and_heading():
    found = [
        problem for name in scanned_files() if name.endswith(".md") for problem in broken_links(name, text_of(name))
    ]
    assert found == []


def test_the_docs_index_lists_every_page():
    index = text_of("docs/README.md")
    pages = [name for name in FILES if fnmatch.fnmatch(name, "docs/*.md") and name != "docs/README.md"]
    assert [page for page in pages if f"]({Path(page).name})" not in index] == []


def test_no_file_names_a_file_outside_the_repository():
    assert [name for name in FILES if name != SELF and OUTSIDE in (text_of(name) or "")] == []


def test_the_checks_find_what_is_broken_and_pass_what_is_not():
    text = 'See trainer/no_such_module.py, docs/settings.md, docker/compose#9153 and "docker/build-push".'
    assert paths_in(text) == ["trainer/no_such_module.py", "docs/settings.md"]
    assert missing_paths("README.md", text) == ["README.md: trainer/no_such_module.py"]
    assert missing_paths("x.py", "uses: docker/setup-buildx-action@v4, compose.workers.yaml, scripts/lint.") == []
    # A file a run writes into its own folder counts; any other Compose file must be there.
    assert missing_paths("x.py", "compose.dev.yaml, compose.nosuch.yaml") == ["x.py: compose.nosuch.yaml"]
    assert missing_paths("x.py", "tests/unit/*/test_*.py and examples/no-such-example/") == [
        "x.py: examples/no-such-example/"
    ]
    cited = 'docs/settings.md, "Deadlines"; docs/settings.md, "Timeouts"; docs/nothing.md, "Deadlines"'
    assert broken_citations("x.py", cited) == [
        'x.py: docs/settings.md, "Timeouts": no such heading in docs/settings.md',
        'x.py: docs/nothing.md, "Deadlines": no such file',
    ]
    links = "[a](settings.md#deadlines) [b](settings.md#timeouts) [c](gone.md) [d](benchmark.png) [e](https://x.org/y)"
    assert broken_links("docs/index.md", links) == [
        "docs/index.md: (settings.md#timeouts): no such heading in docs/settings.md",
        "docs/index.md: (gone.md): no such file",
    ]
    assert headings("# Title\n```sh\n# a comment\n```\n## A section ##\n") == ["Title", "A section"]

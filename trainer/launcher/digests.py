"""Digests the rendezvous compares besides the settings: the project's files, the installed packages,
the image and the training command.

Workers built from different code or different requirements train on silently, each its own way;
one sha256 per worker is enough to stop them before they do. Standard library only, and nothing is
imported from the project or the packages: the launcher never imports TensorFlow.

The project digest (`TFCLUSTER_PROJECT_DIR`, mounted read-only) covers every file below the
directory but those under `__pycache__`, `.git` and virtual environments (a folder holding
`pyvenv.cfg`, such as a `.venv`: the workers run the image's packages, compared on their own), in
the order of their relative paths:

- a regular file of up to LARGE_FILE (16 MiB) by its path and its content;
- a larger one (a data set, a model's weights) by its path and size only: reading gigabytes on
  every start would delay the rendezvous more than an unnoticed same-size change costs;
- a symbolic link by its path and where it points, never followed;
- a file or folder the launcher may not read by its path, marked unreadable;
- nothing else: folders count by the files they hold (an empty one changes nothing), and
  sockets, pipes and devices not at all.

Past PROJECT_FILE_LIMIT (100,000) files, or past PROJECT_READ_LIMIT (256 MiB) of files read
whole, the directory holds data rather than code: a config error says so, instead of a slow start.

The image digest tells two images apart from inside the container, without Docker: the launcher's
own package (the image's `/app/trainer`, the code of `python -m trainer.training` too) by the
project digest's rules, and the operating system's release (`/etc/os-release`, `/etc/debian_version`).
Computed at every start (a few milliseconds for some hundred small files) rather than written into
the image at build time: a value that changed with every build would defeat the build cache (an
unchanged tree would no longer give the same image), one derived from the code is what is computed
here anyway, and this way images built by other means (a baked project, another registry's copy)
are covered too. Python's version and the packages' are compared on their own, by name.

The command digest covers the training command's words and the content of every file a word names
(relative to the working directory) outside the directories compared already: a script mounted on
its own (compose.byo.yaml's `/user/train.py`) is covered; `-m trainer.training` is the image's
code, `train.py` in the project the project's, and a module of an installed package the packages'.
"""

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import re
import stat
from collections.abc import Iterable

SKIPPED_NAMES = frozenset({"__pycache__", ".git"})
# What marks a folder as a virtual environment (PEP 405), such as a project's own `.venv`.
VIRTUAL_ENVIRONMENT_MARK = "pyvenv.cfg"
LARGE_FILE = 16 * 2**20
PROJECT_READ_LIMIT = 256 * 2**20
PROJECT_FILE_LIMIT = 100_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class Digest:
    """A sha256 over many items, with a summary (how many, how big) that a person can compare at a glance."""

    sha256: str
    summary: str

    def __str__(self) -> str:
        # Twelve hex digits tell two digests apart as surely as a short Git commit name does.
        return f"{self.sha256[:12]} ({self.summary})" if self.sha256 else f"({self.summary})"

    def to_record(self) -> dict:
        return {"sha256": self.sha256, "summary": self.summary}

    @classmethod
    def from_record(cls, record: dict | None) -> "Digest | None":
        return None if record is None else cls(sha256=record["sha256"], summary=record["summary"])


def project_digest(directory: str) -> Digest:
    """The digest of the files below `directory`; ValueError (to follow the directory's name) if it cannot be."""
    if not os.path.isdir(directory):
        raise ValueError("is not a directory")
    entries = sorted(_entries(directory), key=lambda entry: os.fsencode(entry[0]))
    combined = hashlib.sha256()
    read = total = 0
    for relative, info in entries:
        kind, detail = _describe(directory, relative, info)
        size = info.st_size if info else 0
        if kind == b"file":
            read += size
            if read > PROJECT_READ_LIMIT:
                raise ValueError(
                    f"holds more than {PROJECT_READ_LIMIT // 2**20} MiB in files of up to "
                    f"{LARGE_FILE // 2**20} MiB ({relative} is past it): {_KEEP_DATA_OUT}"
                )
        total += size if kind in (b"file", b"large") else 0
        # NUL separates the fields: no path, link target or number contains one.
        combined.update(b"\0".join((kind, os.fsencode(relative), str(size).encode(), detail)) + b"\n")
    return Digest(sha256=combined.hexdigest(), summary=f"{len(entries)} files, {total} bytes")


_KEEP_DATA_OUT = "the launcher compares every worker's project files, so keep data sets out of the project directory"


def _entries(top: str) -> list[tuple[str, os.stat_result | None]]:
    """Every file and link below `top` but the skipped names, and every folder it may not list (status None).

    Each as (relative POSIX path, its own status: links are not followed).
    """
    found: list[tuple[str, os.stat_result | None]] = []
    pending = [""]
    while pending:
        relative = pending.pop()
        try:
            with os.scandir(os.path.join(top, relative)) as listing:
                children = list(listing)
        except OSError:  # Unreadable, or gone since it was listed: recorded as such, never a traceback.
            if not relative:
                raise ValueError("cannot be read") from None
            found.append((relative, None))
            continue
        if relative and any(child.name == VIRTUAL_ENVIRONMENT_MARK for child in children):
            continue  # A virtual environment of the host's: the workers run the image's packages.
        for child in children:
            if child.name in SKIPPED_NAMES:
                continue
            path = f"{relative}/{child.name}" if relative else child.name
            try:
                info = child.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # Removed while the project was being read: it is not part of it.
            if stat.S_ISDIR(info.st_mode):
                pending.append(path)  # Folders count by what they hold: an empty one changes nothing.
            elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                found.append((path, info))
            if len(found) > PROJECT_FILE_LIMIT:
                raise ValueError(f"holds more than {PROJECT_FILE_LIMIT} files: {_KEEP_DATA_OUT}")
    return found


def _describe(top: str, relative: str, info: os.stat_result | None) -> tuple[bytes, bytes]:
    """What the digest records of one entry: its kind, and what stands for its content."""
    path = os.path.join(top, relative)
    if info is None:
        return b"unreadable", b""
    if stat.S_ISLNK(info.st_mode):
        return b"link", os.fsencode(os.readlink(path))
    if info.st_size > LARGE_FILE:
        return b"large", b""
    try:
        with open(path, "rb") as handle:
            return b"file", hashlib.file_digest(handle, "sha256").hexdigest().encode()
    except OSError:  # Unreadable, or removed since it was listed.
        return b"unreadable", b""


def installed_packages() -> list[str]:
    """`name==version` of every distribution the launcher's Python sees, names normalized (PEP 503), sorted."""
    found = set()
    for distribution in importlib.metadata.distributions():
        name, version = distribution.metadata.get("Name"), distribution.metadata.get("Version")
        if name and version:  # A broken install without metadata is nothing to compare.
            found.add(f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}")
    return sorted(found)


def packages_digest(packages: Iterable[str] | None = None) -> Digest:
    """The digest of `packages` (`name==version` each), by default those installed."""
    listed = sorted(installed_packages() if packages is None else packages)
    return Digest(
        sha256=hashlib.sha256("\n".join(listed).encode()).hexdigest(),
        summary=f"{len(listed)} packages",
    )


def value_digest(value: str | None) -> str | None:
    """What a user setting's value is compared by: its sha256 (None when unset).

    The rendezvous is served over plain HTTP on the cluster network, answered to every peer on
    every heartbeat, and a difference is printed and recorded: the value itself must travel in
    none of these, for it may be a secret.
    """
    return None if value is None else "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]


# Where the operating system says which release it is (os-release(5)), and Debian its point release.
RELEASE_FILES = ("/etc/os-release", "/etc/debian_version")


def image_digest(package_dir: str, release_files: Iterable[str] = RELEASE_FILES) -> Digest:
    """The digest of the launcher's own package (`package_dir`) and of the release files there are."""
    code = project_digest(package_dir)
    combined = hashlib.sha256(f"code\0{code.sha256}\n".encode())
    texts = []
    for path in release_files:
        try:
            with open(path, "rb") as handle:
                text = handle.read()
        except OSError:
            text = None  # No such file: an OS other than Debian's, say; recorded as missing.
        combined.update(b"\0".join((os.fsencode(path), b"-" if text is None else text)) + b"\n")
        texts.append(text.decode(errors="replace") if text else "")
    return Digest(sha256=combined.hexdigest(), summary=f"trainer code {code.summary}; {_release_name(texts)}")


def _release_name(texts: list[str]) -> str:
    """How a person names the release: os-release's PRETTY_NAME, then a one-line file (Debian's point release)."""
    parts = []
    for text in texts:
        pretty = [line.partition("=")[2].strip("\"' ") for line in text.splitlines() if line.startswith("PRETTY_NAME=")]
        if pretty:
            parts.append(pretty[0])
        elif text.strip() and len(text.strip().splitlines()) == 1:
            parts.append(text.strip())
    return " ".join(parts) or "unknown OS release"


# What a worker told not to compare its command (TFCLUSTER_COMPARE_COMMAND=0) has in place of its digest:
# equal on every worker so told, different from every digest.
UNCOMPARED_COMMAND = Digest(sha256="", summary="not compared: TFCLUSTER_COMPARE_COMMAND=0")


def command_digest(command: list[str], cwd: str, covered: Iterable[str] = ()) -> Digest:
    """The digest of `command`'s words, and of each file a word names, unless it lies in a `covered` folder."""
    combined = hashlib.sha256(json.dumps(command).encode() + b"\n")
    covered = [os.path.realpath(folder) for folder in covered if folder]
    read = 0
    for word in command:
        path = os.path.join(cwd, word)
        try:
            info = os.stat(path)
            real = os.path.realpath(path)
        except (OSError, ValueError):  # No such file, or no path at all (a NUL in it).
            continue
        if not stat.S_ISREG(info.st_mode) or any(os.path.commonpath((real, folder)) == folder for folder in covered):
            continue
        kind, detail = _describe(cwd, word, info)
        combined.update(b"\0".join((kind, os.fsencode(word), str(info.st_size).encode(), detail)) + b"\n")
        read += 1
    files = f", {read} file{'s' if read != 1 else ''} it names" if read else ""
    return Digest(sha256=combined.hexdigest(), summary=f"{len(command)} words{files}")

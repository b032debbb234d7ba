"""The digest of what an image is built from, which its label tfcluster.inputs records.

scripts/setup builds an image only when this digest differs from its label's: Compose's builder
takes about 2 s even when every layer is cached, and setup runs before every run. What goes in:
the base image's id, EXTRA_REQUIREMENTS (a build argument), every file's sha256, and the wheels'
names and sizes, not their content (reading 700 MB of pinned wheels on every run would cost more
than the build it saves; a wheel's name carries its version, and pip checks its hash in the build).
Files in __pycache__ are left out: Python writes them as it runs, and .dockerignore keeps them out.

The digest is, byte for byte, the one setup computed in bash before (test_digest.py keeps that bash
and compares), so that an image built before this module is still current:

    { docker image inspect --format '{{.Id}}' BASE; echo "EXTRA_REQUIREMENTS=$EXTRA_REQUIREMENTS"
      find PATH... -type f ! -name '*.whl' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 -r sha256sum
      find PATH... -type f -name '*.whl' -printf '%p %s\\n' | sort
    } | sha256sum

Hence find's paths (PATH/...; symbolic links neither followed nor taken), sha256sum's lines, and
sort's order: the locale's collation (LC_ALL, LC_COLLATE, LANG), as sort's, bytes in the C locale.
So the digest depends on the locale, as it did: sorting by bytes whatever the locale would make it
the same in every shell and CI job, at the cost of one rebuild of each image built before.

    python3 -m tfcluster.images digest --base-id ID [--extra-requirements=TEXT] [--code PATH]... -- PATH...
    python3 -m tfcluster.images digest --base-id ID [--extra-requirements=TEXT] --image trainer|shaper
"""

import argparse
import functools
import hashlib
import locale
import os
import stat
import sys
from collections.abc import Iterable, Iterator

from tfcluster.images.inputs import IMAGES


class DigestError(Exception):
    """An input cannot be read (a path that is not there, a folder that cannot be listed)."""


def found(paths: Iterable[str]) -> Iterator[tuple[str, int]]:
    """The regular files under each of `paths` (files or folders), with their sizes, named as find
    names them: the path as given, then `/` and the names inside it."""
    for path in paths:
        try:
            info = os.lstat(path)
        except OSError as error:
            raise DigestError(f"{path}: {error.strerror} (an input of the image's build)") from None
        yield from _found(path, info)


def _found(path: str, info: os.stat_result) -> Iterator[tuple[str, int]]:
    # lstat, as find's default (-P): a symbolic link is neither a regular file nor a folder to enter.
    if stat.S_ISREG(info.st_mode):
        yield path, info.st_size
    elif stat.S_ISDIR(info.st_mode):
        try:
            with os.scandir(path) as entries:
                inside = [(entry.path, entry.stat(follow_symlinks=False)) for entry in entries]
        except OSError as error:
            raise DigestError(f"{path}: {error.strerror} (an input of the image's build)") from None
        for child, child_info in inside:
            yield from _found(child, child_info)


def collated(texts: Iterable[str]) -> list[str]:
    """`texts` sorted as GNU sort sorts lines under the current LC_COLLATE (main sets it from the
    environment, as sort does): by their bytes in the C (or POSIX) locale, in any other by its
    collation (strcoll), with bytes to order what that holds equal."""
    texts = list(texts)
    if locale.setlocale(locale.LC_COLLATE) in ("C", "POSIX"):
        return sorted(texts, key=os.fsencode)

    def compare(one: str, other: str) -> int:
        order = locale.strcoll(one, other)
        if order == 0:
            order = (os.fsencode(one) > os.fsencode(other)) - (os.fsencode(one) < os.fsencode(other))
        return order

    return sorted(texts, key=functools.cmp_to_key(compare))


def checksum_line(digest: str, path: str) -> str:
    """sha256sum's line for a file: with a `\\` first, and its name escaped, when the name has a
    backslash, a newline or a carriage return (GNU coreutils 9)."""
    escaped = path.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    first = "" if escaped == path else "\\"
    return f"{first}{digest}  {escaped}\n"


def file_sha256(path: str) -> str:
    hashed = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                hashed.update(block)
    except OSError as error:
        raise DigestError(f"{path}: {error.strerror} (an input of the image's build)") from None
    return hashed.hexdigest()


def files_lines(paths: Iterable[str]) -> bytes:
    """What the files and folders `paths` hold, as the lines to digest: each file's sha256sum line
    (but wheels' and __pycache__'s), sorted by path; then each wheel's `PATH SIZE`, sorted."""
    files, wheels = [], []
    for path, size in found(paths):
        if path.endswith(".whl"):
            wheels.append(f"{path} {size}")
        elif "/__pycache__/" not in path:
            files.append(path)
    lines = [checksum_line(file_sha256(path), path) for path in collated(files)]
    lines += [f"{line}\n" for line in collated(wheels)]
    return os.fsencode("".join(lines))


def inputs_digest(base_id: str, extra_requirements: str, paths: Iterable[str]) -> str:
    """The digest of an image's build inputs: its base image's id (`docker image inspect --format
    '{{.Id}}'`), EXTRA_REQUIREMENTS, and the files and folders `paths` its build reads."""
    head = f"{base_id}\nEXTRA_REQUIREMENTS={extra_requirements}\n"
    return hashlib.sha256(os.fsencode(head) + files_lines(paths)).hexdigest()


def code_digest(dependencies: str, paths: Iterable[str]) -> str:
    """The digest of an image's inputs when they are those of the digest `dependencies` and the code
    in `paths`: a --dev run mounts the code over the image's, so its image is current by the first."""
    return hashlib.sha256(os.fsencode(f"{dependencies}\n") + files_lines(paths)).hexdigest()


def main(arguments: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m tfcluster.images digest",
        description="Prints the digest of an image's build inputs; with --code, then that of those and the code.",
    )
    parser.add_argument("--base-id", required=True, help="the base image's id (docker image inspect --format {{.Id}})")
    parser.add_argument("--extra-requirements", default="", metavar="TEXT", help="EXTRA_REQUIREMENTS (default: none)")
    parser.add_argument("--code", action="append", default=[], metavar="PATH", help="the code's files or folders")
    parser.add_argument(
        "--image", choices=IMAGES, help="an image's own inputs (tfcluster.images.inputs), for --code and PATHs"
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="the files and folders the build reads")
    options = parser.parse_args(arguments)
    if options.image:
        options.paths, options.code = list(IMAGES[options.image].dependencies), list(IMAGES[options.image].code)
    elif not options.paths:
        parser.error("give --image or the PATHs the build reads")
    try:
        digests = image_digests(options.base_id, options.extra_requirements, options.paths, options.code)
    except DigestError as error:
        sys.exit(str(error))
    print(" ".join(digests))
    return 0


def image_digests(base_id: str, extra_requirements: str, paths: Iterable[str], code: Iterable[str] = ()) -> list[str]:
    """The digest of an image's inputs, then, when it has `code`, that of those and the code; in the
    collation sort would use here. Raises DigestError for an input that cannot be read."""
    use_sorts_collation()
    digests = [inputs_digest(base_id, extra_requirements, paths)]
    code = list(code)
    if code:
        digests.append(code_digest(digests[0], code))
    return digests


def use_sorts_collation() -> None:
    """sort's collation: the environment's (LC_ALL, LC_COLLATE, LANG), or C if it names none here."""
    try:
        locale.setlocale(locale.LC_ALL, "")
    except locale.Error:
        locale.setlocale(locale.LC_COLLATE, "C")

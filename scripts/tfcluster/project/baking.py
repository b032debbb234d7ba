"""--bake: your project in an image of its own, its build context made here as `docker build -` reads it."""

import dataclasses
import hashlib
import io
import itertools
import os
import posixpath
import re
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path

from tfcluster.errors import Refusal
from tfcluster.project.layout import IMAGE_REPOSITORY

# -- Baking: the project in an image of its own ---------------------------------------------------
#
# `scripts/run --project DIR --bake` builds docker/Dockerfile.project FROM the project's image, with
# the project as the build context, for engines that do not have the host's folder: a CI
# `container:` job (whose Docker resolves a bind mount's source on the host, where the checkout may
# not be), Swarm's nodes and Kubernetes' pods. The context is made here, as the tar that
# `docker build -` reads, rather than by the docker CLI from the folder, for three reasons: the image
# is named after exactly what is sent; Python's caches, Git's history and virtual environments are
# always left out, which the CLI could do only through a .dockerignore written into your folder;
# and every entry is made root's and readable, never writable, by the workers' user, for which the
# legacy builder (the host's client has no buildx) has no `COPY --chmod`. Your own .dockerignore is
# applied as the docker CLI applies it (moby/patternmatcher), and the --data folder, when it is in
# the project, stays out: data is mounted, with --bake as without.

BAKED_REPOSITORY = "tfcluster-baked"
DOCKERIGNORE = ".dockerignore"
# Left out wherever they are, as the launchers' digest of /project leaves them out
# (trainer/launcher/digests.py): a worker never reads them, and they can be large.
LEFT_OUT_NAMES = frozenset({"__pycache__", ".git"})
VIRTUAL_ENVIRONMENT_MARK = "pyvenv.cfg"
# The Dockerfile's name in the context. It is listed in the context's .dockerignore, so that the
# daemon drops it before `COPY . /project/`: what the docker CLI does with a `-f FILE` from outside
# the context.
CONTEXT_DOCKERFILE = ".tfcluster-project.Dockerfile"
LEFT_OUT = (
    "left out of the image by --bake (by the project's .dockerignore, or as --data's folder, "
    "__pycache__, .git or a virtual environment)"
)
# Images a tag of yours must not replace: the harness's own, which the baked image is built on.
HARNESS_REPOSITORIES = ("tfcluster", IMAGE_REPOSITORY, "tfcluster-shaper")
# The label that ties a baked image to its project's folder (a digest of its path, not the path,
# which would travel with a pushed image), so that a run removes that folder's superseded images.
FOLDER_LABEL = "tfcluster.project.folder"

# An image reference as Docker takes one: an optional registry (a name with a dot or a port, or
# localhost), lowercase path components, an optional tag and, to pull by content, a digest
# (the grammar of Docker's distribution/reference).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = r"(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9.-]+:[0-9]+)(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
IMAGE_REFERENCE = re.compile(rf"(?P<repository>(?:{_REGISTRY}/)?{_COMPONENT}(?:/{_COMPONENT})*)(?::{_TAG})?")
IMAGE_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}")


def check_image(name: str, *, option: str, digest: bool = False) -> str:
    """The repository of the image reference `name`, or a Refusal naming `option`."""
    reference, at, rest = name.partition("@")
    match = IMAGE_REFERENCE.fullmatch(reference)
    if not match or len(match["repository"]) > 255 or (at and not (digest and IMAGE_DIGEST.fullmatch(at + rest))):
        raise Refusal(
            f"{option} {name!r} is not an image name (lowercase NAME[:TAG]"
            f"{'[@sha256:DIGEST]' if digest else ''}, e.g. registry.example.com/my-model:1)"
        )
    return match["repository"]


def check_tag(name: str, base_image: str) -> None:
    """Refuses a --tag that is no image name, or that names one of the harness's own images."""
    repository = check_image(name, option="--tag")
    if repository in HARNESS_REPOSITORIES or name in (base_image, f"{base_image}:latest"):
        raise Refusal(f"--tag {name!r} would replace an image of the harness's own, which the project is baked on")


@dataclasses.dataclass(frozen=True)
class IgnorePattern:
    """One line of a .dockerignore, compiled as moby/patternmatcher compiles it.

    Docker's rules: `*` and `?` within a name, `**` across folders, `[...]` a class, `\\` an escape;
    a pattern that matches a folder leaves out everything below it; a later `!pattern` takes back
    what an earlier one left out; the last pattern that matches a path decides.
    """

    text: str
    exception: bool
    kind: str  # exact, prefix (ends in **), suffix (starts with **) or regexp
    regexp: re.Pattern | None

    @classmethod
    def compile(cls, text: str, exception: bool) -> "IgnorePattern":
        expression, kind, position = "^", "exact", 0
        for iteration in itertools.count():
            if position >= len(text):
                break
            character = text[position]
            position += 1
            if character == "*" and text[position : position + 1] == "*":
                position += 1
                if text[position : position + 1] == "/":
                    position += 1
                if position >= len(text):
                    # A final ** takes everything below, as in .gitignore.
                    if kind == "exact":
                        kind = "prefix"
                    else:
                        expression, kind = expression + ".*", "regexp"
                else:
                    expression, kind = expression + "(.*/)?", "regexp"
                if iteration == 0:
                    kind = "suffix"
            elif character == "*":
                expression, kind = expression + "[^/]*", "regexp"
            elif character == "?":
                expression, kind = expression + "[^/]", "regexp"
            elif character in ".+()|{}$":
                expression += "\\" + character
            elif character == "\\":
                if position < len(text):
                    expression, kind = expression + "\\" + text[position], "regexp"
                    position += 1
                else:
                    expression += "\\"
            elif character in "[]":
                expression, kind = expression + character, "regexp"
            else:
                expression += character
        regexp = None
        if kind == "regexp":
            # \Z rather than Go's $, which in Python would also match before a final newline.
            regexp = re.compile(expression + r"\Z")
        return cls(text=text, exception=exception, kind=kind, regexp=regexp)

    def matches(self, path: str) -> bool:
        if self.kind == "exact":
            return path == self.text
        if self.kind == "prefix":
            return path.startswith(self.text[:-2])
        if self.kind == "suffix":
            suffix = self.text[2:]
            return path.endswith(suffix) or (suffix.startswith("/") and path == suffix[1:])
        return self.regexp.match(path) is not None


def clean_path(text: str) -> str:
    """Go's filepath.Clean, for a slash-separated path: POSIX keeps a leading `//`, Go does not."""
    cleaned = posixpath.normpath(text)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def parse_dockerignore(text: str, where: str) -> tuple[IgnorePattern, ...]:
    """A .dockerignore's patterns, read as Docker reads them (moby/patternmatcher/ignorefile)."""
    patterns = []
    for number, line in enumerate(text.removeprefix("\ufeff").split("\n"), 1):
        # A comment only where the line starts with #, before any blank is trimmed.
        if line.startswith("#"):
            continue
        line = line.strip()
        if not line:
            continue
        exception = line.startswith("!")
        if exception:
            line = line[1:].strip()
        if not line:
            raise Refusal(f"{where} line {number}: '!' alone is not a pattern")
        line = clean_path(line)
        if len(line) > 1 and line.startswith("/"):
            line = line[1:]
        try:
            patterns.append(IgnorePattern.compile(line, exception))
        except re.error as error:
            raise Refusal(f"{where} line {number}: {line!r} is not a valid pattern ({error})") from None
    return tuple(patterns)


def ignored(path: str, patterns: Iterable[IgnorePattern]) -> bool:
    """Whether Docker leaves `path` (slash-separated, from the context) out: the path or a folder above it matches."""
    matched = False
    folders = path.split("/")[:-1]
    for pattern in patterns:
        # An exception can only take back, and a pattern only leave out, what is not so already.
        if pattern.exception != matched:
            continue
        if pattern.matches(path) or any(
            pattern.matches("/".join(folders[: depth + 1])) for depth in range(len(folders))
        ):
            matched = not pattern.exception
    return matched


@dataclasses.dataclass(frozen=True)
class ContextEntry:
    """One entry of the build context: its path from the project, and what the tar says of it."""

    path: str
    kind: str  # directory, file or symlink
    mode: int
    size: int
    mtime: int
    target: str = ""


@dataclasses.dataclass(frozen=True)
class BakeContext:
    """What `scripts/run --bake` sends to `docker build`: the project's entries, and its .dockerignore."""

    directory: str
    entries: tuple[ContextEntry, ...]
    # The project's .dockerignore, as written (empty without one): it goes to the daemon as well.
    dockerignore: str

    @property
    def files(self) -> frozenset[str]:
        return frozenset(entry.path for entry in self.entries if entry.kind != "directory")

    def summary(self) -> str:
        folders = sum(entry.kind == "directory" for entry in self.entries)
        files = len(self.entries) - folders
        size = sum(entry.size for entry in self.entries)
        return f"{files} file{'s' * (files != 1)} and {folders} folder{'s' * (folders != 1)}, {size} bytes"

    def dockerignore_sent(self) -> str:
        """The context's .dockerignore: yours, then the Dockerfile's name (and, without yours, its own)."""
        if not self.dockerignore:
            return f"{DOCKERIGNORE}\n{CONTEXT_DOCKERFILE}\n"
        return self.dockerignore.rstrip("\n") + f"\n{CONTEXT_DOCKERFILE}\n"


def bake_context(directory: str, data: str | None) -> BakeContext:
    """The project's entries that go into the image, in the order of their paths. Raises Refusal."""
    where = os.path.join(directory, DOCKERIGNORE)
    try:
        dockerignore = Path(where).read_text(encoding="utf-8")
    except FileNotFoundError:
        dockerignore = ""
    except (OSError, UnicodeDecodeError) as error:
        raise Refusal(f"--bake: {where} cannot be read: {getattr(error, 'strerror', None) or error}") from None
    if os.path.lexists(os.path.join(directory, CONTEXT_DOCKERFILE)):
        raise Refusal(f"--bake: {directory} has a {CONTEXT_DOCKERFILE}, a name the build context keeps for its own")
    patterns = parse_dockerignore(dockerignore, where)
    exceptions = [pattern.text + "/" for pattern in patterns if pattern.exception]
    entries: list[ContextEntry] = []

    def visit(folder: str) -> None:
        host_folder = os.path.join(directory, folder)
        try:
            children = sorted(os.scandir(host_folder), key=lambda child: child.name)
        except OSError as error:
            raise Refusal(f"--bake: {host_folder} cannot be read: {error.strerror}") from None
        for child in children:
            path = f"{folder}/{child.name}" if folder else child.name
            if child.name in LEFT_OUT_NAMES or path == DOCKERIGNORE:
                continue
            try:
                info = child.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # Removed while the project was being read: it is not part of it.
            left_out = ignored(path, patterns)
            if stat.S_ISDIR(info.st_mode):
                if child.path == data or os.path.isfile(os.path.join(child.path, VIRTUAL_ENVIRONMENT_MARK)):
                    continue
                if not left_out:
                    entries.append(ContextEntry(path, "directory", 0o755, 0, int(info.st_mtime)))
                # Into a folder left out only if an exception may take back something below it, as
                # the docker CLI does (it looks no further than the exception's start).
                if not left_out or any(exception.startswith(path + "/") for exception in exceptions):
                    visit(path)
            elif left_out:
                continue
            elif stat.S_ISREG(info.st_mode):
                if not os.access(child.path, os.R_OK):
                    raise Refusal(f"--bake: {child.path} cannot be read, and would be in the image")
                mode = 0o755 if info.st_mode & stat.S_IXUSR else 0o644
                entries.append(ContextEntry(path, "file", mode, info.st_size, int(info.st_mtime)))
            elif stat.S_ISLNK(info.st_mode):
                entries.append(ContextEntry(path, "symlink", 0o777, 0, int(info.st_mtime), os.readlink(child.path)))
            # Sockets, pipes and devices are nothing a worker could read: like the digest, skip them.

    visit("")
    return BakeContext(directory=directory, entries=tuple(entries), dockerignore=dockerignore)


def _members(context: BakeContext, dockerfile: str) -> Iterable[tuple[tarfile.TarInfo, bytes | str | None]]:
    """The tar's members, each with its content: bytes, a host file's path, or None."""

    def info(name: str, kind: bytes, mode: int, size: int = 0, mtime: int = 0, target: str = "") -> tarfile.TarInfo:
        member = tarfile.TarInfo(name)
        # Root's, so that the workers' user (1000) may read but never write (COPY keeps the modes).
        member.type, member.mode, member.size, member.mtime, member.linkname = kind, mode, size, mtime, target
        member.uid = member.gid = 0
        member.uname = member.gname = "root"
        return member

    for text, name in ((dockerfile, CONTEXT_DOCKERFILE), (context.dockerignore_sent(), DOCKERIGNORE)):
        data = text.encode()
        yield info(name, tarfile.REGTYPE, 0o644, len(data)), data
    kinds = {"directory": tarfile.DIRTYPE, "file": tarfile.REGTYPE, "symlink": tarfile.SYMTYPE}
    for entry in context.entries:
        member = info(entry.path, kinds[entry.kind], entry.mode, entry.size, entry.mtime, entry.target)
        yield member, os.path.join(context.directory, entry.path) if entry.kind == "file" else None


def _content(content: bytes | str | None) -> Iterable[bytes]:
    if isinstance(content, bytes):
        yield content
    elif content is not None:
        with open(content, "rb") as file:
            while chunk := file.read(2**20):
                yield chunk


def context_digest(context: BakeContext, dockerfile: str, base_image_id: str) -> str:
    """The sha256 (hex) of the base image's id and of every member of the context, as sent."""
    digest = hashlib.sha256(f"{base_image_id}\n".encode())
    for member, content in _members(context, dockerfile):
        # NUL separates the fields: no path, link target or number holds one. Times are left out,
        # so that touching a file names no new image.
        fields = (member.type, member.name.encode(), f"{member.mode:o}".encode(), member.linkname.encode())
        digest.update(b"\0".join(fields) + f"\0{member.size}\n".encode())
        for chunk in _content(content):
            digest.update(chunk)
    return digest.hexdigest()


def baked_tag(digest: str) -> str:
    return f"{BAKED_REPOSITORY}:{digest[:12]}"


def folder_label(directory: str) -> str:
    return hashlib.sha256(os.fsencode(directory)).hexdigest()[:12]


def write_context(context: BakeContext, dockerfile: str, stream) -> None:
    """Writes the context as a tar to `stream` (docker build's standard input), never seeking."""
    with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for member, content in _members(context, dockerfile):
            if isinstance(content, bytes):
                archive.addfile(member, io.BytesIO(content))
            elif content is not None:
                with open(content, "rb") as file:
                    archive.addfile(member, file)
            else:
                archive.addfile(member)

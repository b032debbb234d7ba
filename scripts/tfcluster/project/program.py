"""Your command (--command), checked on the host as far as the host can know it."""

import os
import posixpath
import re
import shlex
from pathlib import Path

from tfcluster.errors import Refusal
from tfcluster.project import access
from tfcluster.project.baking import LEFT_OUT
from tfcluster.project.layout import DATA_MOUNT, PROJECT_MOUNT

# -- The command ----------------------------------------------------------------------------------
#
# What can be known on the host is checked there: a program given as a path must be an executable
# file of the project; for `python`/`python3`, the script must be a file of the project (or of the
# data), and `-m MODULE` a module of the project (MODULE's path with .py, or its folder with
# __main__.py) or of the image's own package, trainer. A program found on the image's PATH (bash,
# torchrun) is not checked: only the image knows it.

PYTHONS = ("python", "python3")
# CPython's options that take a value, attached (-Wignore) or as the next word.
PYTHON_OPTIONS_WITH_VALUE = "cmWX"
PYTHON_LONG_OPTIONS_WITH_VALUE = ("--check-hash-based-pycs",)
MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
IMAGE_PACKAGE = "trainer"


def split_command(text: str) -> list[str]:
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise Refusal(f"--command {text!r} cannot be split as a shell would: {error}") from None
    if not words:
        raise Refusal("--command is empty")
    return words


class Mounts:
    """The host folders behind /project and /data, to find on the host what a worker would open.

    With `baked`, the project's files that go into the image (`scripts/run --bake`), by their path
    from the project: one left out of it is as missing on a worker as one that does not exist.
    """

    def __init__(self, project: str, data: str | None, *, baked: frozenset[str] | None = None, bakes: bool = False):
        self.folders = {PROJECT_MOUNT: project, **({DATA_MOUNT: data} if data else {})}
        self.baked = baked
        # Whether the project goes into an image (--bake), whose files are known or not yet.
        self.bakes = bakes or baked is not None

    def left_out(self, mount: str, host: str) -> bool:
        """True if the file at `host`, under `mount`, exists but is not baked into the image."""
        if self.baked is None or mount != PROJECT_MOUNT:
            return False
        return Path(os.path.relpath(host, self.folders[PROJECT_MOUNT])).as_posix() not in self.baked

    def host_path(self, path: str) -> tuple[str, str] | None:
        """(mount, host path) of `path` as a worker in /project would open it, or None if it is
        elsewhere in the container."""
        inside = posixpath.normpath(posixpath.join(PROJECT_MOUNT, path))
        for mount, folder in self.folders.items():
            if inside == mount or inside.startswith(mount + "/"):
                return mount, os.path.join(folder, os.path.relpath(inside, mount))
        if not posixpath.isabs(path):
            # From /project, out of it: a file of yours is never there.
            raise Refusal(f"--command: {path!r} leads out of {PROJECT_MOUNT} (to {inside})")
        return None


def check_command(words: list[str], mounts: Mounts) -> None:
    """Refuses a command whose program, script or module is known on the host not to exist."""
    program = words[0]
    if "/" in program:
        check_file(program, mounts, "program", executable=True)
        return
    if program not in PYTHONS:
        return
    index = 1
    while index < len(words):
        word = words[index]
        if word == "--":
            if index + 1 < len(words):
                check_file(words[index + 1], mounts, "script")
            return
        if word in PYTHON_LONG_OPTIONS_WITH_VALUE:
            index += 2
            continue
        if word.startswith("--") or word == "-":
            index += 1
            continue
        if word.startswith("-"):
            for position, flag in enumerate(word[1:], 2):
                if flag in PYTHON_OPTIONS_WITH_VALUE:
                    attached = word[position:]
                    value = attached or (words[index + 1] if index + 1 < len(words) else None)
                    if value is None:
                        raise Refusal(f"--command: python's -{flag} needs a value")
                    if flag == "c":
                        return
                    if flag == "m":
                        check_module(value, mounts)
                        return
                    index += 1 if attached else 2
                    break
            else:
                index += 1
            continue
        check_file(word, mounts, "script")
        return


def check_file(path: str, mounts: Mounts, what: str, *, executable: bool = False) -> None:
    found = mounts.host_path(path)
    if found is None:
        return  # Elsewhere in the image: the host cannot know.
    mount, host = found
    if not os.path.isfile(host):
        raise Refusal(f"--command: the {what} {path!r} is not a file of {mount} ({host} does not exist)")
    if executable and not os.access(host, os.X_OK):
        raise Refusal(f"--command: the {what} {path!r} is not executable (chmod +x {host})")
    if mounts.left_out(mount, host):
        raise Refusal(f"--command: the {what} {path!r} is {LEFT_OUT}")
    # Baked, every file of the project is made readable to all (tfcluster/project/baking.py).
    if mount != PROJECT_MOUNT or not mounts.bakes:
        access.check_readable("--project" if mount == PROJECT_MOUNT else "--data", mounts.folders[mount], host)


def check_module(module: str, mounts: Mounts) -> None:
    if not MODULE.fullmatch(module):
        raise Refusal(f"--command: {module!r} is not a module name")
    if module.startswith(IMAGE_PACKAGE + "."):
        return
    parts = module.split(".")
    project = mounts.folders[PROJECT_MOUNT]
    candidates = [os.path.join(*parts) + ".py", os.path.join(*parts, "__main__.py")]
    found = [candidate for candidate in candidates if os.path.isfile(os.path.join(project, candidate))]
    if not found:
        raise Refusal(
            f"--command: module {module!r} is not in the project (no {' or '.join(candidates)} in {project}), "
            f"nor the image's {IMAGE_PACKAGE} package"
        )
    if all(mounts.left_out(PROJECT_MOUNT, os.path.join(project, candidate)) for candidate in found):
        raise Refusal(f"--command: module {module!r} ({found[0]}) is {LEFT_OUT}")

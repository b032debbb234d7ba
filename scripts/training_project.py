"""Your whole training project on the cluster: the checks and the files behind `scripts/run --project`.

Everything here runs on the host before anything starts, so that a mistake costs nothing: the
command (does its script or module exist?), the environment your program gets (`--env`,
`--env-file`: Compose's env_file syntax, and no name the harness owns), and your requirements
(plain pip specifiers only, which scripts/setup downloads into docker/extra-wheels). A mistake is a
`Refusal`, whose text is the one line `scripts/run` prints after `run: `.

What a worker sees (docs/bring-your-own.md): the project read-only at /project, its working
directory (mounted, or with --bake copied into an image of its own, whose build context is made
here); your data read-only at /data; your variables, through the env file scripts/run writes
(`.tfcluster/env`, with TFCLUSTER_USER_ENV naming them, which the launchers compare at the
rendezvous). Host only, standard library only: `scripts/run` must work with nothing but python3.
"""

import dataclasses
import hashlib
import io
import itertools
import os
import posixpath
import re
import shlex
import stat
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path

# Where a worker finds what you bring (compose.project.yaml, compose.data.yaml).
PROJECT_MOUNT = "/project"
DATA_MOUNT = "/data"
DEFAULT_SCRIPT = "train.py"
DEFAULT_COMMAND = ("python", DEFAULT_SCRIPT)
REQUIREMENTS_FILE = "requirements.txt"
# The tag of an image with your requirements: one per set of requirements, so that two projects
# never overwrite each other's image, and an unchanged file costs a cached build.
IMAGE_REPOSITORY = "tfcluster-project"
# The variable that names your own variables to the launchers, which compare exactly those.
USER_ENVIRONMENT_LIST = "TFCLUSTER_USER_ENV"

# -- Names your environment may not set -----------------------------------------------------------
#
# The one list of them (docs/bring-your-own.md, "Your program's environment"). Compose's
# `environment:` wins over `env_file`, so most of these could not be overridden anyway; they are
# refused all the same, so that nothing you ask for is silently dropped.

# Set by the harness on every worker: the cluster, the paths, the process's own environment.
# Tuples, not sets: scripts/run --help lists them in this order (docs/commands.md is made from it).
HARNESS_NAMES = (
    "TF_CONFIG",
    "TF_TASK_INDEX",
    "TF_TASK_SLOT",
    "TF_WORKER_HOSTS",
    "TF_WORKER_PORT",
    "TF_RENDEZVOUS_PORT",
    "TF_RESULTS_DIR",
    "TF_CHECKPOINT_DIR",
    "JOB_COMPLETION_INDEX",
    "PATH",
    "HOME",
    "PYTHONPATH",
    # The env file is the whole container's, the launcher's Python included: these would change
    # how the launcher itself runs (warnings turned into errors, another interpreter's library).
    "PYTHONHOME",
    "PYTHONWARNINGS",
    "PYTHONINSPECT",
    "PYTHONSAFEPATH",
)
HARNESS_PREFIXES = ("TFCLUSTER_",)
# The harness's settings: yours to choose, but for the whole cluster (the deadlines, the limits, the
# built-in trainer's and the network's settings), so they are set as variables of scripts/run,
# which compose.yaml passes on (docs/settings.md), not as your program's.
SETTING_NAMES = (
    "TF_JOIN_TIMEOUT",
    "TF_RUN_TIMEOUT",
    "TF_STOP_GRACE",
    "TF_STALL_TIMEOUT",
    "TF_STARTUP_LOGS",
    "TF_RESTART_LIMIT",
    "TF_WORKER_MEMORY",
    "TF_WORKER_CPUS",
)
SETTING_PREFIXES = ("TRAIN_", "TF_NETWORK_")

# A name a process can be given and a shell can say; Compose allows more (dots, dashes), but
# TFCLUSTER_USER_ENV lists names separated by commas, and a program reads them from os.environ.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME_RULE = "letters, digits and _, not starting with a digit"


class Refusal(Exception):
    """Bad input: the one line that says what and why (scripts/run prefixes it with `run: `)."""


def reserved(name: str) -> str | None:
    """Why `name` is not yours to set, or None if it is."""
    if name in HARNESS_NAMES or name.startswith(HARNESS_PREFIXES):
        return f"{name} is set by the harness on every worker, not by you (docs/bring-your-own.md)"
    if name in SETTING_NAMES or name.startswith(SETTING_PREFIXES):
        return (
            f"{name} is a setting of the harness: set it in scripts/run's environment instead "
            f"({name}=... scripts/run ...; docs/settings.md)"
        )
    return None


def check_name(name: str) -> None:
    if not NAME.fullmatch(name):
        raise Refusal(f"{name!r} is not a variable name ({NAME_RULE})")
    reason = reserved(name)
    if reason:
        raise Refusal(reason)


# -- --env NAME=VALUE -----------------------------------------------------------------------------


def parse_assignment(text: str) -> tuple[str, str]:
    """`NAME=VALUE` from the command line: the value as the shell gave it, nothing interpreted."""
    name, equals, value = text.partition("=")
    if not equals:
        raise Refusal(f'--env {text!r} must be NAME=VALUE (to pass on a variable of yours: --env {text}="${text}")')
    try:
        check_name(name)
    except Refusal as refusal:
        raise Refusal(f"--env {refusal}") from None
    return name, value


# -- --env-file FILE: Compose's env_file syntax ---------------------------------------------------
#
# As Compose documents it (docs.docker.com/compose/environment-variables/variable-interpolation/
# and its env-file page) and compose-go's parser does it: `NAME=VALUE` lines, optionally after
# `export `; blank lines and lines starting with # are skipped; an unquoted value ends at ` #` and
# loses its trailing blanks; a single-quoted value is literal (`\'` is a quote); a double-quoted one
# takes the escapes \n \r \t \\ \" \$ and the like; both may span lines; unquoted and double-quoted
# values are interpolated (${NAME}, $NAME, ${NAME:-default} and the other forms, $$ for a dollar),
# from scripts/run's environment, then from the file's earlier lines, as Compose looks them up. A
# bare NAME takes its value from scripts/run's environment, if set there. Stricter than Compose: a
# name as NAME says, no `NAME: VALUE`, and nothing after a closing quote but a comment.

ESCAPE = re.compile(r"\\(?:[abfnrtv$\"\\]|0[0-7]{0,3})")
ESCAPED = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", '"': '"', "\\": "\\"}
BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<operator>:?[-+?])(?P<argument>.*))?", re.DOTALL)
BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def expand_escapes(raw: str) -> str:
    r"""A double-quoted value's escapes, as compose-go expands them; `\$` becomes `$$`, a literal dollar."""

    def replace(match: re.Match) -> str:
        escape = match.group(0)[1:]
        if escape == "$":
            return "$$"
        if escape.startswith("0"):
            # An octal escape needs three digits after the 0 (Go's rule); anything else stays as it is.
            digits = escape[1:]
            return chr(int(digits, 8)) if len(digits) == 3 and int(digits, 8) < 256 else match.group(0)
        return ESCAPED[escape]

    return ESCAPE.sub(replace, raw)


def interpolate(text: str, lookup) -> str:
    """Compose's interpolation of `text`; `lookup(name)` is a value or None. Raises Refusal."""
    result, position = [], 0
    while True:
        dollar = text.find("$", position)
        if dollar < 0:
            result.append(text[position:])
            return "".join(result)
        result.append(text[position:dollar])
        following = text[dollar + 1 : dollar + 2]
        if following == "$":
            result.append("$")
            position = dollar + 2
        elif following == "{":
            end = closing_brace(text, dollar + 2)
            result.append(substitute(text[dollar + 2 : end], lookup))
            position = end + 1
        elif match := BARE.match(text, dollar + 1):
            result.append(lookup(match.group(0)) or "")
            position = match.end()
        else:
            # A dollar before anything else is just a dollar, as in Compose.
            result.append("$")
            position = dollar + 1


def closing_brace(text: str, start: int) -> int:
    depth = 1
    for index in range(start, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    raise Refusal(f"${{{text[start:]} has no closing brace")


def substitute(expression: str, lookup) -> str:
    """The value of `${expression}`: NAME, then :- - :+ + :? or ? and its argument, itself interpolated."""
    match = BRACED.fullmatch(expression)
    if not match:
        raise Refusal(f"${{{expression}}} is not a valid substitution")
    value = lookup(match["name"])
    operator = match["operator"] or ""
    # With the colon, empty counts as unset (as in a shell).
    missing = value is None or (operator.startswith(":") and value == "")
    if operator.endswith("-"):
        return interpolate(match["argument"], lookup) if missing else value
    if operator.endswith("+"):
        return "" if missing else interpolate(match["argument"], lookup)
    if operator.endswith("?") and missing:
        message = interpolate(match["argument"], lookup) or "required"
        raise Refusal(f"{match['name']} is unset{' or empty' if operator == ':?' else ''}: {message}")
    return value or ""


def read_user_file(path: str, shown: str) -> str:
    """The text of a file the user named (`shown` as the messages name it). Raises Refusal."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise Refusal(f"{shown} does not exist") from None
    except IsADirectoryError:
        raise Refusal(f"{shown} is a folder, not a file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise Refusal(f"{shown} cannot be read: {getattr(error, 'strerror', None) or error}") from None


def parse_env_file(path: str, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """The (name, value) pairs of an env file, in order; `path` as the user gave it. Raises Refusal."""
    text = read_user_file(path, f"--env-file {path!r}")
    pairs: list[tuple[str, str]] = []
    earlier: dict[str, str] = {}

    def lookup(name: str) -> str | None:
        return environ.get(name, earlier.get(name))

    lines = text.replace("\r\n", "\n").split("\n")
    index = 0
    while index < len(lines):
        number = index + 1
        try:
            parsed, index = parse_statement(lines, index, lookup, environ)
        except Refusal as refusal:
            raise Refusal(f"--env-file {path} line {number}: {refusal}") from None
        if parsed is not None:
            name, value = parsed
            earlier[name] = value
            pairs.append(parsed)
    return pairs


def parse_statement(lines: list[str], index: int, lookup, environ) -> tuple[tuple[str, str] | None, int]:
    """The statement starting at `lines[index]`, and the index of the line after it."""
    line = lines[index].strip()
    if not line or line.startswith("#"):
        return None, index + 1
    line = re.sub(r"^export\s+", "", line)
    name, equals, rest = line.partition("=")
    name = name.strip()
    if not equals:
        # A bare name: its value from the environment, if it is set there (as Compose does).
        if not NAME.fullmatch(line):
            raise Refusal(f"expected NAME=VALUE, got {lines[index].strip()!r}")
        check_name(line)
        return ((line, environ[line]) if line in environ else None), index + 1
    if not NAME.fullmatch(name):
        raise Refusal(f"expected NAME=VALUE, got {lines[index].strip()!r} ({NAME_RULE})")
    check_name(name)
    rest = rest.lstrip(" \t")
    if rest[:1] not in ("'", '"'):
        value = rest.split(" #", 1)[0].rstrip()
        return (name, interpolate(value, lookup)), index + 1
    raw, after, index = quoted(lines, index, rest)
    if after.strip() and not after.strip().startswith("#"):
        raise Refusal(f"{name}: unexpected {after.strip()!r} after the closing quote")
    if rest[0] == '"':
        return (name, interpolate(expand_escapes(raw), lookup)), index + 1
    return (name, raw), index + 1


def quoted(lines: list[str], index: int, rest: str) -> tuple[str, str, int]:
    r"""A quoted value that may span lines: its text (with `\quote` unescaped), what follows it on its
    last line, and that line's index."""
    quote, characters, escaped = rest[0], [], False
    text, position = rest, 1
    while True:
        while position < len(text):
            character = text[position]
            position += 1
            if escaped:
                escaped = False
                # An escaped quote loses its backslash; any other escaped character keeps it.
                characters.append(character if character == quote else "\\" + character)
            elif character == "\\":
                escaped = True
            elif character == quote:
                return "".join(characters), text[position:], index
            else:
                characters.append(character)
        index += 1
        if index >= len(lines):
            raise Refusal(f"unterminated quoted value {rest}")
        characters.append("\n")
        text, position = lines[index], 0


def merge(*sources: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Later wins: the env files in order, then --env."""
    merged: dict[str, str] = {}
    for source in sources:
        for name, value in source:
            merged.pop(name, None)
            merged[name] = value
    return merged


def encode(value: str) -> str:
    r"""`value` as an env file's value that Compose reads back exactly, whatever its version.

    Single quotes are literal, unless the value holds a quote or ends in a backslash (then the
    closing quote would read as escaped); double quotes take every other value but one ending in a
    backslash, for the same reason; such a value goes unquoted if it can.
    """
    if "'" not in value and not value.endswith("\\"):
        return f"'{value}'"
    if not value.endswith("\\"):
        escaped = (
            value.replace("\\", "\\\\")
            .replace('"', '\\"')
            .replace("$", "\\$")
            .replace("\n", "\\n")
            .replace("\r", "\\r")
        )
        return f'"{escaped}"'
    if value == value.strip() and not re.search(r"[\n\r]| #", value) and value[:1] not in ("'", '"'):
        return value.replace("$", "$$")
    raise Refusal("a value with both a ' and a final \\ cannot be written to Compose's env file")


def env_file_text(variables: Mapping[str, str]) -> str:
    """The env file every worker reads (compose.project.yaml's env_file): your variables and their list."""
    lines = [
        "# Written by scripts/run --project on every run: your program's environment (--env-file, then",
        "# --env), and the list of its names, which the launchers compare at the rendezvous. Do not edit.",
    ]
    for name in sorted(variables):
        try:
            lines.append(f"{name}={encode(variables[name])}")
        except Refusal as refusal:
            raise Refusal(f"{name}: {refusal}") from None
    lines.append(f"{USER_ENVIRONMENT_LIST}={','.join(sorted(variables))}")
    return "\n".join(lines) + "\n"


# -- Requirements ---------------------------------------------------------------------------------
#
# Plain requirement specifiers only, `NAME[EXTRAS]VERSIONS` (`tqdm==4.67.1`, `pandas>=2,<3`), with
# comments and blank lines: they go to pip on the host and to the image through
# EXTRA_REQUIREMENTS, separated by spaces, held to docker/requirements.txt's pins. Options (`-r`,
# `--index-url`, `-e`, `--hash`), URLs and paths would reach what the image cannot (it installs
# offline, from docker/extra-wheels), and environment markers answer a question whose answer is
# fixed here (Linux, x86_64, CPython 3.11).

SPECIFIER = r"(?:~=|===|==|!=|<=|>=|<|>)[A-Za-z0-9.*+!_-]+"
REQUIREMENT = re.compile(
    rf"(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
    rf"(?:\[(?P<extras>[A-Za-z0-9._-]+(?:,[A-Za-z0-9._-]+)*)\])?"
    rf"(?P<versions>{SPECIFIER}(?:,{SPECIFIER})*)?"
)


# TensorFlow and its Keras packages are the image's own (docker/requirements.txt): a project that
# names them, as most do, gets the image's versions; installing them again would pull the 572 MB
# `tensorflow` wheel, or another TensorFlow than the cluster's.
IMAGE_PINS = Path(__file__).resolve().parent.parent / "docker" / "requirements.txt"
PROVIDED = {
    "tensorflow": "tensorflow-cpu",
    "tensorflow-cpu": "tensorflow-cpu",
    "tf-keras": "tf-keras",
    "keras": "keras",
}


def image_version(distribution: str) -> str:
    for line in IMAGE_PINS.read_text(encoding="utf-8").splitlines():
        # A pin's line ends in a continuation (`\`): its hash follows on the next line.
        name, _, version = line.split("#", 1)[0].strip().removesuffix("\\").strip().partition("==")
        if canonical(name) == distribution:
            return version
    raise Refusal(f"{IMAGE_PINS} pins no {distribution}")


def provided_by_image(requirement: str, where: str) -> bool:
    """True when the image has what `requirement` asks for (so it is not installed again); Refusal on a conflict."""
    match = REQUIREMENT.fullmatch(requirement)
    distribution = PROVIDED.get(match["name"])
    if distribution is None:
        return False
    version = image_version(distribution)
    if match["versions"] is None or all(satisfies(version, one) for one in match["versions"].split(",")):
        return True
    raise Refusal(
        f"{where}: {requirement!r} conflicts with the image's {distribution}=={version}: "
        f"name it without a version, or as =={version}, or leave it out"
    )


def release(text: str) -> tuple[int, ...]:
    """A version's release numbers (`2.21.0` -> (2, 21, 0)), padded for comparison; Refusal if it has others."""
    if not re.fullmatch(r"[0-9]+(?:\.[0-9]+)*", text):
        raise Refusal(f"cannot compare the version {text!r} with the image's: name the package without a version")
    return tuple(int(part) for part in text.split("."))


def satisfies(version: str, specifier: str) -> bool:
    """Whether the image's `version` (plain release numbers) meets one PEP 440 specifier, e.g. `>=2.16`."""
    operator, wanted = re.fullmatch(r"(~=|===|==|!=|<=|>=|<|>)(.+)", specifier).groups()
    if operator in ("==", "!=") and wanted.endswith(".*"):
        prefix = release(wanted[:-2])
        return (release(version)[: len(prefix)] == prefix) == (operator == "==")
    if operator == "===":
        return version == wanted
    ours, theirs = release(version), release(wanted)
    width = max(len(ours), len(theirs))
    ours, theirs = ours + (0,) * (width - len(ours)), theirs + (0,) * (width - len(theirs))
    if operator == "~=":  # At least `wanted`, within its release series: ~=2.21 means >=2.21, ==2.*.
        series = release(wanted)[:-1]
        return ours >= theirs and release(version)[: len(series)] == series
    return {
        "==": ours == theirs,
        "!=": ours != theirs,
        "<": ours < theirs,
        "<=": ours <= theirs,
        ">": ours > theirs,
        ">=": ours >= theirs,
    }[operator]


def canonical(name: str) -> str:
    """A distribution's name as pip compares names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirements(path: str) -> tuple[list[str], list[str]]:
    """The normalized specifiers of a requirements file to install, sorted, and those the image
    already provides (TensorFlow and Keras), sorted; `path` as shown. Raises Refusal."""
    text = read_user_file(path, path)
    requirements, provided = set(), set()
    for number, line in enumerate(text.splitlines(), 1):
        # pip's comments: from a # at the start or after a blank.
        content = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not content:
            continue
        requirement = parse_requirement(content, f"{path} line {number}")
        (provided if provided_by_image(requirement, f"{path} line {number}") else requirements).add(requirement)
    return sorted(requirements), sorted(provided)


def parse_requirement(text: str, where: str) -> str:
    if text.startswith("-") or re.search(r"\s-", text):
        raise Refusal(f"{where}: {text!r} is an option; only requirement specifiers (NAME[EXTRAS]VERSIONS) are taken")
    if "://" in text or "@" in text or text.startswith((".", "/", "~")) or text.endswith((".whl", ".zip", ".tar.gz")):
        raise Refusal(
            f"{where}: {text!r} is a URL or a path; only requirement specifiers (NAME[EXTRAS]VERSIONS) are taken"
        )
    if ";" in text:
        raise Refusal(
            f"{where}: {text!r} has an environment marker; the image is Linux x86_64 with CPython 3.11: "
            "keep the line without it if it applies there"
        )
    # Blanks may stand between the parts (`tqdm >= 4, < 5`), never inside one (`my package`).
    inside = re.search(r"[A-Za-z0-9.*+!_-]\s+[A-Za-z0-9.*+!_-]", text)
    match = None if inside else REQUIREMENT.fullmatch(re.sub(r"\s+", "", text))
    if not match:
        raise Refusal(f"{where}: {text!r} is not a requirement specifier (NAME[EXTRAS]VERSIONS, e.g. tqdm==4.67.1)")
    extras = (
        f"[{','.join(sorted(canonical(extra) for extra in match['extras'].split(',')))}]" if match["extras"] else ""
    )
    return f"{canonical(match['name'])}{extras}{match['versions'] or ''}"


def image_tag(requirements: Iterable[str]) -> str:
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()
    return f"{IMAGE_REPOSITORY}:{digest[:12]}"


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

    def __init__(self, project: str, data: str | None, *, baked: frozenset[str] | None = None):
        self.folders = {PROJECT_MOUNT: project, **({DATA_MOUNT: data} if data else {})}
        self.baked = baked

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

"""Your program's variables: `--env NAME=VALUE`, `--env-file FILE` in Compose's env_file syntax, and
the env file scripts/run writes for compose.project.yaml's env_file."""

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from tfcluster.errors import Refusal
from tfcluster.project.layout import USER_ENVIRONMENT_LIST
from tfcluster.project.names import NAME, NAME_RULE, check_name

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

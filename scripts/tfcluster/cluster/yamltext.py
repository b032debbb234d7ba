"""YAML text for Compose files, written from Python data with the comments a reader needs.

The host package installs nothing (pyproject.toml: no dependencies), and Compose files need what a
YAML library's dumper does not write: comments, anchors and aliases, `<<` merges and Compose's
`!reset` and `!override` tags. The subset here is what fragments.py uses; a test loads every file
it writes with PyYAML and compares the result with the data.

  Comment("why")      as a mapping's key: `# why` lines above the next key (its value unused)
  BLANK               as a mapping's key: an empty line
  Noted(value, "x")   a value with `  # x` after it, on its line
  Anchored("a", map)  a mapping that defines `&a`; Alias("a") is `*a`
  Tagged("!reset", None), Flow([...]) or Flow({...}) written on one line; Block([...]) as `- ` lines
"""

import dataclasses
import json
import re


class Comment:
    """A mapping key that writes comment lines; each one is its own key (compared by identity)."""

    def __init__(self, text: str | None):
        self.text = text


def blank() -> Comment:
    return Comment(None)


@dataclasses.dataclass(frozen=True)
class Noted:
    value: object
    note: str


@dataclasses.dataclass(frozen=True)
class Anchored:
    name: str
    value: dict


@dataclasses.dataclass(frozen=True)
class Alias:
    name: str


@dataclasses.dataclass(frozen=True)
class Tagged:
    tag: str
    value: object


class Flow(list):
    """A list written inline, `[a, b]` (the default for a list of plain values)."""


class FlowMap(dict):
    """A mapping written inline, `{a: 1, b: 2}`."""


class Block(list):
    """A list written as `- ` lines (the default for a list of mappings)."""


INDENT = "  "
# Plain scalars YAML (1.1, which Compose's parser still honours for these) would read as something
# other than the string: booleans, null, numbers (decimal, hexadecimal, octal, binary, base-60 as
# "0:1000"), and the empty string.
_NOT_A_STRING = re.compile(
    r"(?i:y|n|yes|no|true|false|on|off|null|~|[-+]?\.inf|\.nan)|"
    r"[-+]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?|[-+]?[\d_]+(:[\d_]+)+|"
    r"[-+]?0([xX][0-9a-fA-F_]+|[oO]?[0-7_]+|[bB][01_]+)|"
)
_INDICATORS = tuple("!&*{}[]|>'\"%@`#,?:") + ("- ",)


def document(value: dict, header: str = "") -> str:
    """`value` (a mapping) as a whole file, after `header`'s comment lines."""
    lines = [_comment(line) for line in header.splitlines()] if header else []
    lines += _mapping(value, 0)
    return "\n".join(lines) + "\n"


def scalar(value, *, flow: bool = False) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, Alias):
        return f"*{value.name}"
    if isinstance(value, Tagged):
        return f"{value.tag} {_inline(value.value)}"
    text = str(value)
    plain = not (
        _NOT_A_STRING.fullmatch(text)
        or text.startswith(_INDICATORS)
        or text != text.strip()
        or ": " in text
        or " #" in text
        or text.endswith(":")
        or (flow and any(mark in text for mark in ",[]{}"))
    )
    return text if plain else json.dumps(text, ensure_ascii=False)


def _inline(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{scalar(key, flow=True)}: {_inline(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(item) for item in value) + "]"
    return scalar(value, flow=True)


def _comment(line: str) -> str:
    return f"# {line}" if line.strip() else "#"


def _mapping(value: dict, depth: int) -> list[str]:
    pad = INDENT * depth
    lines = []
    for key, item in value.items():
        if isinstance(key, Comment):
            lines += [""] if key.text is None else [pad + _comment(line) for line in key.text.splitlines()]
            continue
        note = ""
        if isinstance(item, Noted):
            item, note = item.value, f"  # {item.note}"
        head = f"{pad}{scalar(key)}:"
        if isinstance(item, Anchored):
            lines.append(f"{head} &{item.name}{note}")
            lines += _mapping(item.value, depth + 1)
        elif isinstance(item, (FlowMap, Flow)) or (isinstance(item, list) and not _is_block(item)):
            lines.append(f"{head} {_inline(item)}{note}")
        elif isinstance(item, dict):
            lines.append(head + note)
            lines += _mapping(item, depth + 1)
        elif isinstance(item, list):
            lines.append(head + note)
            lines += _sequence(item, depth + 1)
        else:
            lines.append(f"{head} {scalar(item)}{note}")
    return lines


def _is_block(items: list) -> bool:
    return isinstance(items, Block) or any(isinstance(item, dict) for item in items)


def _sequence(items: list, depth: int) -> list[str]:
    pad = INDENT * depth
    lines = []
    for item in items:
        if isinstance(item, Comment):
            lines += [pad + _comment(line) for line in item.text.splitlines()]
        elif isinstance(item, dict):
            inner = _mapping(item, depth + 1)
            lines.append(f"{pad}- {inner[0].lstrip()}")
            lines += inner[1:]
        elif isinstance(item, list):
            lines.append(f"{pad}- {_inline(item)}")
        else:
            lines.append(f"{pad}- {scalar(item)}")
    return lines

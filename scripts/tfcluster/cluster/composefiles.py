"""Compose files read as Compose reads them, for what the dry run shows without calling Docker.

Only what the dry run needs: a block under a YAML anchor, a setting's first declaration, the first
image, the project's name by Compose's own precedence, interpolation and the .env file.
"""

import re
from pathlib import Path

from tfcluster.cluster.compose import BASE_FILE
from tfcluster.paths import ROOT
from tfcluster.project import envfiles

# A worker's TF_* and TRAIN_* settings, as compose.yaml declares them.
SETTING = re.compile(r"^\s+((?:TF|TRAIN)_[A-Z0-9_]+): (.*)$", re.MULTILINE)


def anchored_block(text: str, anchor: str) -> str:
    """The lines under the YAML key that defines `&anchor` (those indented deeper than it)."""
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if re.search(rf"&{re.escape(anchor)}\s*$", line):
            indent = len(line) - len(line.lstrip())
            block = []
            for inner in lines[number + 1 :]:
                if inner.strip() and len(inner) - len(inner.lstrip()) <= indent:
                    break
                block.append(inner)
            return "\n".join(block) + "\n"
    raise LookupError(f"{BASE_FILE} has no block anchored &{anchor}; the dry run reads it")


def declared(text: str, name: str) -> str:
    """The value a Compose file gives the setting `name` (its first declaration)."""
    match = re.search(rf"^\s+{re.escape(name)}: (.*)$", text, re.MULTILINE)
    if not match:
        raise LookupError(f"no {name} in the Compose file; the dry run reads it")
    return unquote(match.group(1))


def first_image(text: str) -> str:
    match = re.search(r"^\s+image: (\S+)\s*$", text, re.MULTILINE)
    if not match:
        raise LookupError("no image: in the Compose file; the dry run reads it")
    return match.group(1)


def project_name(texts: dict[str, str], variables: dict[str, str]) -> tuple[str, str]:
    """Compose's project name and where it comes from, by Compose's own precedence."""
    if variables.get("COMPOSE_PROJECT_NAME"):
        return variables["COMPOSE_PROJECT_NAME"], "COMPOSE_PROJECT_NAME"
    for name, text in reversed(texts.items()):
        match = re.search(r"^name: (\S+)\s*$", text, re.MULTILINE)
        if match:
            return interpolate(unquote(match.group(1)), variables), f"{name}'s name"
    return ROOT.name, "the project's folder"


def interpolate(text: str, variables: dict[str, str]) -> str:
    """Compose's interpolation, as the env files' (tfcluster/project/envfiles.py) does it."""
    return envfiles.interpolate(text, variables.get)


def unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return re.sub(r"\s+#.*$", "", value)


def dotenv(path: Path) -> dict[str, str]:
    """The variables of Compose's .env file, which it reads for interpolation (the environment wins)."""
    if not path.is_file():
        return {}
    variables = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, equals, value = line.strip().partition("=")
        if equals and key and not key.startswith("#"):
            variables[key.strip()] = unquote(value)
    return variables


def base_image(variables: dict[str, str]) -> str:
    """The image the workers run without --bake, and a baked one is built on: compose.yaml's."""
    return interpolate(first_image((ROOT / BASE_FILE).read_text(encoding="utf-8")), variables)

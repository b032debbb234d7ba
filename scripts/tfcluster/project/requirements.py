"""Your requirements: plain pip specifiers, held to the image's pins (docker/requirements.txt)."""

import hashlib
import re
from collections.abc import Iterable

from tfcluster.errors import Refusal
from tfcluster.images import pins
from tfcluster.project.envfiles import read_user_file
from tfcluster.project.layout import IMAGE_REPOSITORY

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
IMAGE_PINS = pins.PINS
PROVIDED = {
    "tensorflow": "tensorflow-cpu",
    "tensorflow-cpu": "tensorflow-cpu",
    "tf-keras": "tf-keras",
    "keras": "keras",
}


def image_version(distribution: str) -> str:
    # One reader of the pins file, tfcluster.images.pins (scripts/setup's too), which knows its form.
    try:
        version = pins.version_of(distribution, IMAGE_PINS)
    except pins.PinsError as error:
        raise Refusal(str(error)) from None
    if version is None:
        raise Refusal(f"{IMAGE_PINS} pins no {distribution}")
    return version


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

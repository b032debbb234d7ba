"""docker/requirements.txt, the image's pins: read, stripped of their hashes, and hashed.

The file is pip's, in the narrow form `scripts/setup --pin-hashes` writes: comments and blank
lines, and pins, `NAME==VERSION`, each followed by its wheel's sha256 on a continuation line:

    tensorflow-cpu==2.21.0 \\
        --hash=sha256:2b847d217b02...

Why so narrow: every package the image gets is one exact wheel, the one recorded (pip's
--require-hashes refuses any other), and anything but a plain pin (a range, a URL, an environment
marker, an option) names no one wheel to record. One reader of it here, for scripts/setup (the
command line below) and for tfcluster.project.requirements (`version_of`).

    python3 -m tfcluster.images pins --pins-only FILE              the pins without their hashes
    python3 -m tfcluster.images pins --write-hashes PINS WHEELS    the pins with their wheels' sha256
    python3 -m tfcluster.images pins --version-of NAME FILE        the version FILE pins NAME to
"""

import argparse
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tfcluster.paths import ROOT

PINS = ROOT / "docker" / "requirements.txt"

# A plain pin, the one form a line may pin in (write_hashes hashes only those).
PIN = re.compile(r"([A-Za-z0-9_.-]+)==([^\s#]+)")
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
# sed's [[:space:]] (the C locale's blanks), which pins_only must match; Python's \s takes Unicode's too.
BLANK = "[ \t\v\f\r]"
CONTINUATION = re.compile(rf"{BLANK}*\\$")
HASH_LINE = re.compile(rf"{BLANK}*--hash=")


class PinsError(Exception):
    """The pins, or the wheels downloaded for them, are not what the image can be built from; the
    message says why, in one line."""


@dataclass(frozen=True)
class Pin:
    """One pin: its distribution's name as written, its version, and the sha256 of its wheels (none
    before `--pin-hashes`; pip takes several, one a line)."""

    name: str
    version: str
    sha256: tuple[str, ...] = ()


def canonical(name: str) -> str:
    """A distribution's name as pip compares names (PEP 503): `Tf_Keras` is `tf-keras`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(text: str, where: str = "docker/requirements.txt") -> list[Pin]:
    """The pins of a pins file's `text`, in its order (`where` names it in errors). Raises
    PinsError for a line that is neither a comment, a blank, a pin nor a hash after a pin."""
    pins: list[Pin] = []
    continued = False  # The line before ended in `\`: this one holds its pin's hash.
    for number, line in enumerate(text.splitlines(), 1):
        content = CONTINUATION.sub("", line).strip()
        digest = HASH.fullmatch(content)
        if continued and digest:
            pins[-1] = Pin(pins[-1].name, pins[-1].version, (*pins[-1].sha256, digest[1]))
        elif continued:
            raise PinsError(
                f"{where} line {number}: not a hash (--hash=sha256:HEX) after a line ending in \\: {content}"
            )
        elif digest:
            raise PinsError(f"{where} line {number}: a hash with no pin before it (whose line ends in \\)")
        elif content and not content.startswith("#"):
            pin = PIN.fullmatch(content)
            if pin is None:
                raise PinsError(f"{where} line {number}: not a plain pin (NAME==VERSION): {content}")
            pins.append(Pin(pin[1], pin[2]))
        # A comment's `\` continues nothing: pip reads a comment up to its line's end.
        continued = content != line.strip() and not content.startswith("#")
    if continued:
        raise PinsError(f"{where}: its last line ends in \\, continuing nothing")
    return pins


def read(path: Path = PINS) -> list[Pin]:
    """The pins of the file at `path` (default: docker/requirements.txt). Raises PinsError."""
    return parse(path.read_text(encoding="utf-8"), str(path))


def version_of(distribution: str, path: Path = PINS) -> str | None:
    """The version the pins file pins `distribution` to (any spelling of its name), None if it pins
    none. Raises PinsError for a file not in the pins' form."""
    wanted = canonical(distribution)
    return next((pin.version for pin in read(path) if canonical(pin.name) == wanted), None)


def pins_only(text: str) -> str:
    """The pins file's `text` without its hashes, exactly as `sed -e '/^[[:space:]]*--hash=/d' -e
    's/[[:space:]]*\\\\$//'` makes it (docker/Dockerfile does so): as constraints, hashes would put pip in
    a mode that refuses any requirement without one, your own unpinned ones too."""
    # Lines as sed's: ended by "\n" only (str.splitlines would split at "\r" and others too), and a
    # last line without one kept without one.
    *lines, last = text.split("\n")
    kept = [CONTINUATION.sub("", line) + "\n" for line in lines if not HASH_LINE.match(line)]
    if last and not HASH_LINE.match(last):
        kept.append(CONTINUATION.sub("", last))
    return "".join(kept)


def wheel_hashes(wheels: Path) -> dict[tuple[str, str], str]:
    """The sha256 of each wheel in the folder `wheels`, by its (canonical name, version)."""
    hashes = {}
    for wheel in wheels.glob("*.whl"):
        # A wheel's file name is NAME-VERSION-TAGS.whl, its NAME with `_` for `-` (PEP 427).
        parts = wheel.name.split("-")
        if len(parts) < 2:
            raise PinsError(f"not a wheel's name (NAME-VERSION-...whl): {wheel.name}")
        hashes[(canonical(parts[0]), parts[1])] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return hashes


def write_hashes(pins: str, wheels: Path) -> str:
    """The pins file for `pins` (its text without hashes, as pins_only makes it) with each pin's
    wheel's sha256 beside it, from the wheels pip downloaded into the folder `wheels`; comments and
    blank lines as they are. Raises PinsError for a line that is not a plain pin, a pin with no
    wheel, or a wheel with no pin: each pin must name exactly the one wheel the image gets."""
    hashes = wheel_hashes(wheels)
    lines = []
    for line in pins.splitlines():
        pin = PIN.fullmatch(line.strip())
        if pin is None:
            if line.strip() and not line.lstrip().startswith("#"):
                raise PinsError(f"not a plain pin (NAME==VERSION), so it cannot be hashed: {line.strip()}")
            lines.append(line)
            continue
        digest = hashes.pop((canonical(pin[1]), pin[2]), None)
        if digest is None:
            raise PinsError(f"no wheel downloaded for {line.strip()} (its version spelled as in the wheel's name?)")
        lines.append(f"{line.strip()} \\\n    --hash=sha256:{digest}")
    if hashes:
        raise PinsError(f"wheels with no pin: {sorted(hashes)}")
    return "".join(f"{line}\n" for line in lines)


def main(arguments: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m tfcluster.images pins", description="docker/requirements.txt's pins, for scripts/setup."
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--pins-only", metavar="FILE", help="print FILE without its hashes")
    action.add_argument(
        "--write-hashes", nargs=2, metavar=("PINS", "WHEELS"), help="print PINS with the sha256 of its wheels in WHEELS"
    )
    action.add_argument("--version-of", nargs=2, metavar=("NAME", "FILE"), help="print the version FILE pins NAME to")
    options = parser.parse_args(arguments)
    try:
        if options.pins_only:
            # Bytes in, bytes out, as sed's: "\r\n" stays, and so does a name in no encoding.
            text = Path(options.pins_only).read_bytes().decode("utf-8", "surrogateescape")
            sys.stdout.buffer.write(pins_only(text).encode("utf-8", "surrogateescape"))
        elif options.write_hashes:
            pins, wheels = options.write_hashes
            sys.stdout.write(write_hashes(Path(pins).read_text(encoding="utf-8"), Path(wheels)))
        else:
            name, path = options.version_of
            version = version_of(name, Path(path))
            if version is None:
                raise PinsError(f"{path} pins no {name}")
            print(version)
    except PinsError as error:
        # As the program setup ran before: the message on stderr, status 1, nothing on stdout.
        sys.exit(str(error))
    return 0

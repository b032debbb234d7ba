"""The wheels the images install: containers cannot reach PyPI, the host can.

The pinned ones (docker/requirements.txt, each checked against the sha256 beside its pin) go in
docker/wheels; your trainer's own, EXTRA_REQUIREMENTS, held to the pins, in docker/extra-wheels,
a folder of their own so that the pinned wheelhouse, and so the cached layer that installs
TensorFlow, stays as it is. Each set is downloaded for the image's platform (Linux x86_64, CPython
3.11) whatever the host's Python is, and skipped when a stamp says it is what is asked.
"""

import hashlib
import sys
import tempfile
import time
from pathlib import Path

from tfcluster.images import pins
from tfcluster.setup.children import Children, CommandFailed
from tfcluster.setup.files import replace_whole
from tfcluster.setup.messages import SetupError, say

PINS = Path("docker/requirements.txt")
WHEELHOUSE = Path("docker/wheels")
EXTRA_WHEELHOUSE = Path("docker/extra-wheels")
# sha256sum's line for the pins whose wheels are in WHEELHOUSE (`sha256sum --check` reads it).
STAMP = WHEELHOUSE / ".requirements.sha256"
# What was asked of EXTRA_WHEELHOUSE: outside the build context, so that it never changes what the
# image's layers are cached by.
EXTRA_STAMP = Path(".tfcluster/extra-wheels.sha256")
# The image's platform, whatever the host's: wheels for Linux x86_64, CPython 3.11.
_MANYLINUX = (
    "manylinux_2_28",
    "manylinux_2_27",
    "manylinux_2_17",
    "manylinux2014",
    "manylinux2010",
    "manylinux1",
    "manylinux_2_5",
)
TARGET = ("--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp") + tuple(
    argument for tag in _MANYLINUX for argument in ("--platform", f"{tag}_x86_64")
)
DOWNLOAD = (sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check")


def pinned_command(folder: Path = WHEELHOUSE, requirements: Path = PINS) -> list[str]:
    """pip's download of the pinned wheels: each must match the sha256 beside its pin."""
    return [*DOWNLOAD, "--no-deps", "--require-hashes", *TARGET, "-d", str(folder), "-r", str(requirements)]


def ensure_pinned(children: Children) -> None:
    stamp = f"{hashlib.sha256(PINS.read_bytes()).hexdigest()}  {PINS}\n"
    if STAMP.is_file() and STAMP.read_text(encoding="utf-8") == stamp:
        return
    say(f"downloading the pinned wheels into {WHEELHOUSE}")
    started = time.monotonic()
    children.run(pinned_command())
    STAMP.write_text(stamp, encoding="utf-8")
    size = sum(wheel.stat().st_size for wheel in WHEELHOUSE.glob("*.whl"))
    say(f"downloaded the pinned wheels ({size / 2**20:.0f} MB) in {time.monotonic() - started:.0f} s")


def ensure_extra(children: Children, extra: str) -> None:
    """EXTRA_REQUIREMENTS' wheels (`extra`: requirements separated by spaces), with what they need,
    held to the pins; the folder is emptied first, so that an image gets only what is asked now."""
    asked = hashlib.sha256(f"{extra}\n".encode() + PINS.read_bytes()).hexdigest()
    if EXTRA_STAMP.is_file() and EXTRA_STAMP.read_text(encoding="utf-8").strip() == asked:
        return
    EXTRA_WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    _empty(EXTRA_WHEELHOUSE)
    EXTRA_STAMP.unlink(missing_ok=True)
    requirements = extra.split()
    if requirements:
        say(f"downloading EXTRA_REQUIREMENTS ({extra}) into {EXTRA_WHEELHOUSE}")
        _download_extra(children, requirements)
    _refuse_tensorflow(extra)
    EXTRA_STAMP.parent.mkdir(parents=True, exist_ok=True)
    EXTRA_STAMP.write_text(f"{asked}\n", encoding="utf-8")


def _download_extra(children: Children, requirements: list[str]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        # The pins without their hashes: as constraints, hashes would put pip in a mode that
        # refuses any requirement without one, your own unpinned ones too.
        constraints = Path(scratch) / "constraints.txt"
        constraints.write_text(pins.pins_only(PINS.read_text(encoding="utf-8")), encoding="utf-8")
        command = [*DOWNLOAD, *TARGET, "-d", str(EXTRA_WHEELHOUSE), "-c", str(constraints)]
        try:
            children.run([*command, *requirements], capture=True)
            return
        except CommandFailed as together:
            # One line naming the requirement: pip's own output is many lines and names none of
            # them when several conflict, so each is tried alone to find the first that fails.
            for requirement in requirements:
                try:
                    children.run([*command, requirement], capture=True)
                except CommandFailed as alone:
                    raise SetupError(
                        f"requirement '{requirement}' conflicts with the image's pins ({PINS}) or cannot be "
                        f"downloaded: {first_error(alone.output)}"
                    ) from None
            raise SetupError(
                f"requirements '{' '.join(requirements)}' conflict with each other or with the image's pins "
                f"({PINS}): {first_error(together.output)}"
            ) from None


def _refuse_tensorflow(extra: str) -> None:
    """TensorFlow itself must not come in: a requirement that needs `tensorflow` (tensorflow-text,
    tf-models-official...) would bring its 572 MB wheel, installed over the image's tensorflow-cpu."""
    tensorflow = sorted(wheel.name for wheel in EXTRA_WHEELHOUSE.glob("tensorflow-[0-9]*.whl"))
    if tensorflow:
        _empty(EXTRA_WHEELHOUSE)
        raise SetupError(
            f"requirements '{extra}' need the full tensorflow package ({tensorflow[0]}); the image has "
            f"tensorflow-cpu {pins.version_of('tensorflow-cpu', PINS)}: leave out what needs it, or install "
            "that package with --no-deps in your program's image"
        )


def _empty(folder: Path) -> None:
    for wheel in folder.glob("*.whl"):
        wheel.unlink()


def first_error(output: str) -> str:
    """pip's first error line in `output`, without its prefix or a list of every version there is;
    its last line if it has none."""
    lines = output.splitlines()
    line = next((line for line in lines if line.startswith("ERROR: ")), None)
    if line is None:
        line = next((line for line in reversed(lines) if line.strip()), "")
    return line.removeprefix("ERROR: ").split(" (from versions: ")[0]


def write_hashes(children: Children) -> None:
    """Each pin's wheel's sha256 beside it in the pins file (--pin-hashes): only a complete file
    replaces the pins, so a failure leaves them as they were."""
    with tempfile.TemporaryDirectory() as scratch:
        # Without their hashes: pip would check the new wheels against the old hashes.
        bare = Path(scratch) / "requirements.txt"
        bare.write_text(pins.pins_only(PINS.read_text(encoding="utf-8")), encoding="utf-8")
        say("downloading the pinned wheels to hash them")
        children.run([*DOWNLOAD, "--no-deps", *TARGET, "-d", str(Path(scratch) / "wheels"), "-r", str(bare)])
        try:
            hashed = pins.write_hashes(bare.read_text(encoding="utf-8"), Path(scratch) / "wheels")
        except pins.PinsError as error:
            raise SetupError(str(error)) from None
    replace_whole(PINS, hashed)
    say(f"wrote the sha256 of {hashed.count('--hash=')} wheels into {PINS}")

"""tfcluster.images.pins: docker/requirements.txt read, stripped of its hashes as sed strips them, and
hashed as the program scripts/setup ran before (kept below, and compared)."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tfcluster.images import pins

from tests.conftest import ROOT

HASH_A = "a" * 64
HASH_B = "b" * 64
PINS = f"""# The image's pins.
tensorflow-cpu==2.21.0 \\
    --hash=sha256:{HASH_A}

# Two hashes, as pip takes them.
Tf_Keras==2.21.0 \\
    --hash=sha256:{HASH_A} \\
    --hash=sha256:{HASH_B}
six==1.17.0
"""
# The sed of scripts/setup's pins_only and of docker/Dockerfile.
SED = ["sed", "-e", "/^[[:space:]]*--hash=/d", "-e", r"s/[[:space:]]*\\$//"]
# scripts/setup's hash writer before it moved here (its heredoc, verbatim): write_hashes must do as it does.
OLD_WRITE_HASHES = r"""
import hashlib, pathlib, re, sys
requirements, wheels = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def key(name):
    return re.sub(r"[-_.]+", "-", name).lower()
hashes = {}
for wheel in wheels.glob("*.whl"):
    name, version = wheel.name.split("-")[:2]
    hashes[(key(name), version)] = hashlib.sha256(wheel.read_bytes()).hexdigest()
for line in requirements.read_text().splitlines():
    pin = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s#]+)", line.strip())
    if pin is None:
        if line.strip() and not line.lstrip().startswith("#"):
            sys.exit(f"not a plain pin (NAME==VERSION), so it cannot be hashed: {line.strip()}")
        print(line)
        continue
    digest = hashes.pop((key(pin.group(1)), pin.group(2)), None)
    if digest is None:
        sys.exit(f"no wheel downloaded for {line.strip()} (its version spelled as in the wheel's name?)")
    print(f"{line.strip()} \\\n    --hash=sha256:{digest}")
if hashes:
    sys.exit(f"wheels with no pin: {sorted(hashes)}")
"""


def test_a_pins_file_is_read_as_pins_with_their_hashes():
    assert pins.parse(PINS) == [
        pins.Pin("tensorflow-cpu", "2.21.0", (HASH_A,)),
        pins.Pin("Tf_Keras", "2.21.0", (HASH_A, HASH_B)),
        pins.Pin("six", "1.17.0"),
    ]


def test_the_images_pins_file_pins_each_package_once_with_one_hash():
    read = pins.read()
    assert len(read) >= 30
    assert all(len(pin.sha256) == 1 for pin in read)
    assert len({pins.canonical(pin.name) for pin in read}) == len(read)
    assert pins.version_of("tensorflow-cpu") == next(pin.version for pin in read if pin.name == "tensorflow-cpu")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("six>=1.16\n", "x line 1: not a plain pin (NAME==VERSION): six>=1.16"),
        ("six==1.17.0  # why\n", "x line 1: not a plain pin (NAME==VERSION): six==1.17.0  # why"),
        ("-r more.txt\n", "x line 1: not a plain pin (NAME==VERSION): -r more.txt"),
        (f"six==1.17.0\n    --hash=sha256:{HASH_A}\n", "x line 2: a hash with no pin before it"),
        ("six==1.17.0 \\\nidna==3.20\n", "x line 2: not a hash (--hash=sha256:HEX) after a line ending in \\: idna"),
        ("six==1.17.0 \\\n", "x: its last line ends in \\, continuing nothing"),
    ],
)
def test_a_line_that_is_not_a_pin_a_comment_or_a_pins_hash_is_refused_naming_it(text, message):
    with pytest.raises(pins.PinsError) as refused:
        pins.parse(text, "x")
    assert str(refused.value).startswith(message)


def test_a_version_is_found_by_any_spelling_of_the_name_and_none_for_a_name_not_pinned(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text(PINS)
    assert pins.version_of("tf-keras", path) == "2.21.0"
    assert pins.version_of("TF.keras", path) == "2.21.0"
    assert pins.version_of("keras", path) is None


def test_the_pins_without_hashes_are_the_pins_one_a_line():
    assert pins.pins_only(PINS).splitlines() == [
        "# The image's pins.",
        "tensorflow-cpu==2.21.0",
        "",
        "# Two hashes, as pip takes them.",
        "Tf_Keras==2.21.0",
        "six==1.17.0",
    ]


@pytest.mark.skipif(shutil.which("sed") is None, reason="no sed")
@pytest.mark.parametrize(
    "text",
    [
        PINS,
        (ROOT / "docker" / "requirements.txt").read_text(),
        "six==1.17.0 \\\n\t--hash=sha256:x",  # The last line a hash, with no newline.
        "six==1.17.0\t\\",  # No newline after the last pin.
        "six==1.17.0 \\\r\n    --hash=sha256:x\r\n",  # Windows' line ends: the \r stays, so does the \.
        "a \\ b \\\\\n  x--hash=\n\n\n",
        "",
    ],
)
def test_the_pins_without_hashes_are_what_seds_makes_them(text):
    # Bytes, not text: text mode would read sed's "\r\n" as "\n".
    sed = subprocess.run(SED, input=text.encode(), capture_output=True, check=True).stdout
    assert pins.pins_only(text).encode() == sed


def wheelhouse(folder: Path, *names: str) -> dict[str, str]:
    """A folder of fake wheels (small files, each its own content): each wheel's sha256 by name."""
    folder.mkdir()
    for name in names:
        (folder / name).write_bytes(f"not really {name}".encode())
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in names}


def test_each_pin_gets_its_wheels_sha256_whatever_its_names_spelling(tmp_path):
    hashes = wheelhouse(tmp_path / "wheels", "tf_keras-2.21.0-py3-none-any.whl", "six-1.17.0-py2.py3-none-any.whl")
    written = pins.write_hashes("# pins\n\nTf.Keras==2.21.0\n  six==1.17.0  \n", tmp_path / "wheels")
    assert written == (
        "# pins\n\n"
        f"Tf.Keras==2.21.0 \\\n    --hash=sha256:{hashes['tf_keras-2.21.0-py3-none-any.whl']}\n"
        f"six==1.17.0 \\\n    --hash=sha256:{hashes['six-1.17.0-py2.py3-none-any.whl']}\n"
    )
    # What it writes reads back as the pins, with their hashes, and without them as they were.
    assert pins.parse(written) == [
        pins.Pin("Tf.Keras", "2.21.0", (hashes["tf_keras-2.21.0-py3-none-any.whl"],)),
        pins.Pin("six", "1.17.0", (hashes["six-1.17.0-py2.py3-none-any.whl"],)),
    ]
    assert pins.pins_only(written) == "# pins\n\nTf.Keras==2.21.0\nsix==1.17.0\n"


def test_the_images_pins_hash_back_to_the_file_as_it_is(tmp_path):
    # The recorded hashes stand in for the wheels' contents: each fake wheel's sha256 is recorded instead.
    read = pins.read()
    written = pins.write_hashes(pins.pins_only(pins.PINS.read_text()), wheel_folder(tmp_path, read))
    recorded = {pin.name: pin.sha256[0] for pin in read}
    fake = {pin.name: hashlib.sha256(f"{pin.name}-{pin.version}".encode()).hexdigest() for pin in read}
    expected = pins.PINS.read_text()
    for name in recorded:
        expected = expected.replace(recorded[name], fake[name])
    assert written == expected


def wheel_folder(tmp_path: Path, read: list[pins.Pin]) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    for pin in read:
        wheel = folder / f"{pin.name.replace('-', '_')}-{pin.version}-py3-none-any.whl"
        wheel.write_bytes(f"{pin.name}-{pin.version}".encode())
    return folder


@pytest.mark.parametrize(
    ("text", "wheels", "message"),
    [
        ("six>=1.16\n", [], "not a plain pin (NAME==VERSION), so it cannot be hashed: six>=1.16"),
        ("six==1.17.0 # why\n", [], "not a plain pin (NAME==VERSION), so it cannot be hashed: six==1.17.0 # why"),
        (
            "six==1.17.0\n",
            ["six-1.17-py3-none-any.whl"],
            "no wheel downloaded for six==1.17.0 (its version spelled as in the wheel's name?)",
        ),
        (
            "six==1.17.0\n",
            ["six-1.17.0-py3-none-any.whl", "idna-3.20-py3-none-any.whl", "A.B-1-py3-none-any.whl"],
            "wheels with no pin: [('a-b', '1'), ('idna', '3.20')]",
        ),
    ],
)
def test_a_line_not_a_plain_pin_a_pin_with_no_wheel_and_a_wheel_with_no_pin_are_refused(
    tmp_path, text, wheels, message
):
    wheelhouse(tmp_path / "wheels", *wheels)
    with pytest.raises(pins.PinsError) as refused:
        pins.write_hashes(text, tmp_path / "wheels")
    assert str(refused.value) == message
    # As the program of scripts/setup before it: the same message, from the command line too.
    (tmp_path / "pins.txt").write_text(text)
    for command in (["-c", OLD_WRITE_HASHES], ["-m", "tfcluster.images", "pins", "--write-hashes"]):
        result = run(*command, tmp_path / "pins.txt", tmp_path / "wheels")
        assert (result.returncode, result.stderr) == (1, f"{message}\n"), command


def run(*arguments) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": f"{ROOT / 'scripts'}:{ROOT}"}
    return subprocess.run([sys.executable, *map(str, arguments)], capture_output=True, text=True, env=environment)


def test_the_command_line_writes_what_the_program_of_scripts_setup_wrote(tmp_path):
    wheelhouse(tmp_path / "wheels", "tf_keras-2.21.0-py3-none-any.whl", "six-1.17.0-py2.py3-none-any.whl")
    (tmp_path / "pins.txt").write_text("# pins\n\n  # indented\nTf.Keras==2.21.0\n  six==1.17.0  \n")
    old = run("-c", OLD_WRITE_HASHES, tmp_path / "pins.txt", tmp_path / "wheels")
    new = run("-m", "tfcluster.images", "pins", "--write-hashes", tmp_path / "pins.txt", tmp_path / "wheels")
    assert (new.returncode, new.stdout, new.stderr) == (old.returncode, old.stdout, old.stderr) == (0, old.stdout, "")


def test_the_command_line_prints_the_pins_only_and_a_pins_version(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text(PINS)
    assert run("-m", "tfcluster.images", "pins", "--pins-only", path).stdout == pins.pins_only(PINS)
    version = run("-m", "tfcluster.images", "pins", "--version-of", "tf-keras", path)
    assert (version.returncode, version.stdout, version.stderr) == (0, "2.21.0\n", "")
    missing = run("-m", "tfcluster.images", "pins", "--version-of", "keras", path)
    assert (missing.returncode, missing.stdout, missing.stderr) == (1, "", f"{path} pins no keras\n")


def test_the_command_line_names_its_modules_when_it_is_given_none():
    result = run("-m", "tfcluster.images")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "usage: python3 -m tfcluster.images {digest,pins} ARGUMENTS... (-h for each)\n"

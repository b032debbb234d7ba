"""Every wheel the image gets is the one recorded: a sha256 beside each pin, checked by pip."""

import re
import subprocess
import sys

import pytest
from tfcluster.setup import wheelhouse

from tests.conftest import ROOT

REQUIREMENTS = ROOT / "docker" / "requirements.txt"
WHEELHOUSE = ROOT / "docker" / "wheels"
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+) \\$")
HASH = re.compile(r"^    --hash=sha256:[0-9a-f]{64}$")


def test_every_pin_carries_exactly_one_hash():
    lines = [line for line in REQUIREMENTS.read_text().splitlines() if line and not line.startswith("#")]
    pins = [line for line in lines if PIN.match(line)]
    assert len(pins) == len(lines) // 2 >= 30
    for pin, following in zip(lines[::2], lines[1::2], strict=True):
        assert PIN.match(pin), pin
        assert HASH.match(following), (pin, following)


def test_the_image_and_the_set_up_install_nothing_unhashed():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert "--no-deps --require-hashes" in dockerfile
    setup = wheelhouse.pinned_command()
    assert "--require-hashes" in setup and setup[setup.index("-r") + 1] == "docker/requirements.txt"


def six_requirement() -> tuple[str, str]:
    """six's pin and its recorded hash line."""
    lines = REQUIREMENTS.read_text().splitlines()
    index = next(number for number, line in enumerate(lines) if line.startswith("six=="))
    return lines[index], lines[index + 1]


@pytest.mark.skipif(not list(WHEELHOUSE.glob("six-*.whl")), reason="no wheelhouse: scripts/setup downloads it")
@pytest.mark.parametrize("tampered", [False, True])
def test_pip_refuses_a_wheel_whose_hash_differs(tmp_path, tampered):
    pin, recorded = six_requirement()
    if tampered:
        recorded = recorded[:-4] + ("0000" if not recorded.endswith("0000") else "1111")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"{pin}\n{recorded}\n")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-index", "--require-hashes"]
    command += ["--find-links", str(WHEELHOUSE), "-d", str(tmp_path / "out"), "-r", str(requirements)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if tampered:
        assert result.returncode != 0
        assert "THESE PACKAGES DO NOT MATCH THE HASHES" in result.stderr
    else:
        assert result.returncode == 0, result.stderr

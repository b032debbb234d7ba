"""scripts/launch.py, which starts every host command: where the harness's bytecode goes."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# A command of a stand-in harness: what its process was started with, and where its module's bytecode is.
PROBE = """\
import json, os, sys
import tfcluster.probed
print(json.dumps({
    "prefix": sys.pycache_prefix,
    "dont_write": sys.dont_write_bytecode,
    "cached": tfcluster.probed.__cached__,
    "environment": {name: os.environ.get(name) for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")},
}))
"""


@pytest.fixture
def harness(tmp_path):
    """A checkout with this launch.py and a `probe` command in place of the harness's own."""
    root = tmp_path / "checkout"
    package = root / "scripts" / "tfcluster"
    (package / "commands").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "launch.py", root / "scripts" / "launch.py")
    for init in (package / "__init__.py", package / "commands" / "__init__.py"):
        init.write_text("")
    (package / "probed.py").write_text("VALUE = 1\n")
    (package / "commands" / "probe.py").write_text(PROBE)
    return root


def probe(root, **variables) -> dict:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("PYTHON")}
    result = subprocess.run(
        [sys.executable, str(root / "scripts" / "launch.py"), "probe"],
        env={**environment, **variables},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)


def test_under_pythondontwritebytecode_the_harness_bytecode_is_kept_in_its_state_folder(harness):
    found = probe(harness, PYTHONDONTWRITEBYTECODE="1")
    kept = harness / ".tfcluster" / "pycache"
    assert found["prefix"] == str(kept)
    assert found["dont_write"] is False
    assert found["cached"].startswith(str(kept) + os.sep)
    assert os.path.isfile(found["cached"])
    # Nothing beside a source file, where the variable's users do not want it.
    assert not list((harness / "scripts").rglob("__pycache__"))
    # The processes a command starts get the environment as it was.
    assert found["environment"] == {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": None}
    # The next command reads it (a stale one would be rewritten: its time would change).
    written = os.stat(found["cached"]).st_mtime_ns
    assert probe(harness, PYTHONDONTWRITEBYTECODE="1")["cached"] == found["cached"]
    assert os.stat(found["cached"]).st_mtime_ns == written


def test_otherwise_python_keeps_its_bytecode_as_it_would(harness, tmp_path):
    plain = probe(harness)
    assert (plain["prefix"], plain["dont_write"]) == (None, False)
    assert os.path.dirname(plain["cached"]) == str(harness / "scripts" / "tfcluster" / "__pycache__")
    elsewhere = str(tmp_path / "elsewhere")
    chosen = probe(harness, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=elsewhere)
    # A prefix of the user's own is theirs: with it set, the variable is respected as it is.
    assert (chosen["prefix"], chosen["dont_write"]) == (elsewhere, True)
    assert not (harness / ".tfcluster").exists()

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def run_python(*arguments, env=None, timeout=30):
    """Runs a Python entry point of the project as a user would, from the project root."""
    return subprocess.run(
        [sys.executable, *arguments], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def free_port() -> int:
    """A TCP port nothing listens on right now, so parallel launchers never collide."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]

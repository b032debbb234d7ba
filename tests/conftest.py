import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def run_python(*arguments, env=None, timeout=30):
    """Runs a Python entry point of the project as a user would, from the project root."""
    import subprocess

    return subprocess.run(
        [sys.executable, *arguments], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )

"""The suite's modules in the order tests/conftest.py gives them: the longest container modules
first, the other container modules next, the unit tests last (so that the suite's two processes
end together), each module's own tests in their written order."""

import subprocess
import sys

from tests.conftest import LONGEST_FIRST, ROOT


def collected(*modules: str) -> list[str]:
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    return [line for line in listed.stdout.splitlines() if "::" in line]


def test_the_longest_modules_run_first_the_unit_tests_last_and_each_module_in_its_own_order():
    # Given in the opposite order: a unit module, a short container module, then two long ones.
    ids = collected(
        "tests/unit/repository/test_workflows.py",
        "tests/container/test_mismatch.py",
        LONGEST_FIRST[1],
        LONGEST_FIRST[0],
    )
    modules = list(dict.fromkeys(test.split("::")[0] for test in ids))
    assert modules == [
        LONGEST_FIRST[0],
        LONGEST_FIRST[1],
        "tests/container/test_mismatch.py",
        "tests/unit/repository/test_workflows.py",
    ]
    written = [test for test in ids if test.startswith(LONGEST_FIRST[0])]
    source = (ROOT / LONGEST_FIRST[0]).read_text()
    assert written == sorted(written, key=lambda test: source.index(f"def {test.split('::')[1].split('[')[0]}("))


def test_every_module_named_as_longest_is_a_container_module_of_the_suite():
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    for module in LONGEST_FIRST:
        assert module.startswith("tests/container/") and (ROOT / module).is_file(), module


def test_the_suite_keeps_that_order_rather_than_pytest_xdists():
    assert "--no-loadscope-reorder" in (ROOT / "scripts" / "test").read_text().splitlines()[-1]

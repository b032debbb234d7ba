"""A straggler made on purpose (`scripts/run --slow`) is named in the verdict, which still passes.

The normal runs that must not name one are tests/container/test_harness.py's two-, three- and
four-worker runs, which assert that no such line is printed.
"""

import re

import pytest

from tests.container.conftest import report_of
from trainer.contract.exitcodes import ExitCode

pytestmark = [pytest.mark.container, pytest.mark.timeout(420)]

STRAGGLER = re.compile(
    r"verifier-1 +\| slowest worker: worker-1, busy (\d+)% of its 0\.25 CPUs against (\d+)% on the other "
    r"\(a synchronous cluster runs at its slowest worker's pace\)\n"
    r"verifier-1 +\| verdict: PASS: 2 of 2 workers agree"
)


def test_a_worker_slowed_by_scripts_run_is_named_and_the_verdict_still_passes(scripts_run):
    # scripts/run itself, as a user runs it, as a Compose project of the test's own (torn down by the fixture).
    project = scripts_run("--slow", "worker-1=0.25")
    result = project.finish(timeout=360)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr[-2000:]
    assert project.state("worker-1")["HostConfig"]["NanoCpus"] == 250_000_000
    assert project.state("worker-0")["HostConfig"]["NanoCpus"] == 2_000_000_000
    found = STRAGGLER.search(result.stdout)
    assert found, result.stdout[-3000:]
    busy, other = (int(figure) for figure in found.groups())
    # Measured: 71-100% on the slowed worker, 9-12% on the other (docs/verifier.md, "The slowest worker").
    assert busy >= 2 * other and 0 < other <= 30, found.group(0)
    # Its report: the straggler named, and each worker's usage against its limit, as the verdict had it.
    data, opened = report_of(project, result.stderr)
    assert data["verdict"]["straggler"] in opened.dom
    assert {name: usage["cpu_limit"] for name, usage in data["verdict"]["usage"].items()} == {
        "worker-0": 2.0,
        "worker-1": 0.25,
    }

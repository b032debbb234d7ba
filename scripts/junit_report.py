"""scripts/run --junit FILE: the run's verdict as JUnit XML, for a CI system's test report.

Written after every run once its arguments are accepted, whatever its end (a failed set-up, a
refusal, Ctrl-C or a CI job's SIGTERM), so that a CI job's report fails whenever its gate does.
The verdict is the verifier's own, from what the run left: each worker's log and exit code
(`docker compose logs`, `docker compose ps`), judged in the verifier's saved-logs mode, which
fails a worker that exited non-zero as the live verdict does (trainer/verifier/given_exits.py).
Where the run ended before its workers did anything, or the saved logs pass where the live
verdict did not, the report says so in a failing case of its own. Host only, standard library only.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.etree import ElementTree

SUITE = "tfcluster.verify"


def write(path: Path, *, status: int, workers: list[str], root: Path, environment: dict[str, str]) -> None:
    """Writes the report for a run that ended with `status`, its cluster having `workers` (none if
    it ended before the cluster came up)."""
    try:
        report = _report(status, workers, root, environment)
    except Exception as error:  # The report must be written all the same: a CI job reads it.
        report = _suite([("scripts/run", f"the run ended with exit status {status}; its report failed: {error}")])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ElementTree.tostring(report, encoding="unicode", xml_declaration=True), encoding="utf-8")


def _report(status: int, workers: list[str], root: Path, environment: dict[str, str]) -> ElementTree.Element:
    with tempfile.TemporaryDirectory(prefix="tfcluster-junit-") as directory:
        # No workers: the run ended before its cluster came up, and what Compose holds is an earlier run's.
        logs = _saved_logs(Path(directory), workers, root, environment) if workers else []
        report = _judged(logs, Path(directory), root, environment) if logs else None
    if report is None:
        why = "left no worker's log to judge" if workers else "before its workers had run"
        report = _suite([("scripts/run", f"the run ended with exit status {status} {why}")])
    elif status != 0 and int(report.get("failures", "0")) == 0:
        # The live verdict failed where the saved logs pass (a verifier stopped, say): the gate wins.
        case = ElementTree.SubElement(report, "testcase", classname="tfcluster.cluster", name="scripts/run")
        message = f"scripts/run exited {status} (the live verdict), though the workers' logs pass"
        ElementTree.SubElement(case, "failure", message=message).text = message
        report.set("tests", str(int(report.get("tests", "0")) + 1))
        report.set("failures", "1")
    return report


def _saved_logs(directory: Path, workers: list[str], root: Path, environment: dict[str, str]) -> list[Path]:
    """Each worker's log and the exit codes, saved in `directory`; none if no worker has a container."""
    listed = _compose(["ps", "--all", "--format", "{{.Service}} {{.ExitCode}}", *workers], root, environment)
    if listed.returncode != 0 or not listed.stdout.strip():
        return []
    (directory / "exit-codes.txt").write_text(listed.stdout, encoding="utf-8")
    logs = []
    for worker in workers:
        log = _compose(["logs", "--no-color", "--no-log-prefix", worker], root, environment)
        path = directory / f"{worker}.log"
        path.write_text(log.stdout, encoding="utf-8")
        logs.append(path)
    return logs


def _judged(logs: list[Path], directory: Path, root: Path, environment: dict[str, str]):
    """The verifier's JUnit for the saved logs, parsed; None if it wrote none."""
    report = directory / "verdict.xml"
    verify = [sys.executable, "-m", "trainer.verifier", *map(str, logs), "--exit-codes-from"]
    verify += [str(directory / "exit-codes.txt"), "--junit", str(report)]
    # Its table was printed live by the verifier service already: not twice.
    subprocess.run(verify, cwd=root, env={**environment, "PYTHONPATH": str(root)}, capture_output=True)
    if not report.exists():
        return None
    return ElementTree.fromstring(report.read_text(encoding="utf-8"))


def _suite(failures: list[tuple[str, str]]) -> ElementTree.Element:
    suite = ElementTree.Element("testsuite", name=SUITE, tests=str(len(failures)), failures=str(len(failures)))
    for name, message in failures:
        case = ElementTree.SubElement(suite, "testcase", classname="tfcluster.cluster", name=name)
        ElementTree.SubElement(case, "failure", message=message).text = message
    return suite


def _compose(arguments: list[str], root: Path, environment: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", "compose", *arguments],
        cwd=root,
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        errors="replace",  # A program's log may hold bytes that are not UTF-8.
    )

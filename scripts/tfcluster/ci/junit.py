"""scripts/run --junit FILE: the run's verdict as JUnit XML, for a CI system's test report.

Written after every run once its arguments are accepted, whatever its end (a failed set-up, a
refusal, Ctrl-C or a CI job's SIGTERM), so that a CI job's report fails whenever its gate does.
The cases are the verifier's own, made from its verdict record (trainer/contract/verdict.py).
Where the run ended before its workers ran, or before the verifier gave a verdict, or the gate
failed where the verdict passed, the report says so in a failing case of its own.
"""

from pathlib import Path
from xml.etree import ElementTree

from trainer.contract import verdict as records

SUITE = records.SUITE


def write(path: Path, *, status: int, record: dict | None, ran: bool) -> None:
    """Writes the report for a run that ended with `status`: the verifier's verdict (`record`) if
    it gave one, for a cluster that was brought up (`ran`)."""
    if record is None:
        why = "before the verifier gave a verdict" if ran else "before its workers had run"
        _write(path, _suite([("scripts/run", f"the run ended with exit status {status} {why}")]))
        return
    report = ElementTree.fromstring(records.junit(record))
    if status != 0 and int(report.get("failures", "0")) == 0:
        # The verdict passed, yet the run failed after it (stopped, say): the gate wins.
        case = ElementTree.SubElement(report, "testcase", classname="tfcluster.cluster", name="scripts/run")
        message = f"scripts/run exited {status}, though the verifier's verdict passed"
        ElementTree.SubElement(case, "failure", message=message).text = message
        report.set("tests", str(int(report.get("tests", "0")) + 1))
        report.set("failures", "1")
    _write(path, report)


def write_unfinished(path: Path) -> None:
    """The report while the run is under way, replaced when it ends: one that is killed outright
    (SIGKILL, a runner that died) leaves a failing report, never none or an earlier run's."""
    why = "the run did not end: it was killed before it could write its verdict (SIGKILL, or its runner died)"
    _write(path, _suite([("scripts/run", why)]))


def write_failure(path: Path, status: int, why: str) -> None:
    """The report of a run whose own reading of the verdict failed: it fails, saying why."""
    _write(path, _suite([("scripts/run", f"the run ended with exit status {status}; {why}")]))


def _write(path: Path, report: ElementTree.Element) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ElementTree.tostring(report, encoding="unicode", xml_declaration=True), encoding="utf-8")


def _suite(failures: list[tuple[str, str]]) -> ElementTree.Element:
    suite = ElementTree.Element("testsuite", name=SUITE, tests=str(len(failures)), failures=str(len(failures)))
    for name, message in failures:
        case = ElementTree.SubElement(suite, "testcase", classname="tfcluster.cluster", name=name)
        ElementTree.SubElement(case, "failure", message=message).text = message
    return suite

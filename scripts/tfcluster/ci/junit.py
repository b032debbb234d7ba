"""scripts/run --junit FILE: the run's verdict as JUnit XML, for a CI system's test report.

Written after every run once its arguments are accepted, whatever its end (a failed set-up, a
refusal, Ctrl-C or a CI job's SIGTERM), so that a CI job's report fails whenever its gate does.
The cases are the verifier's own (tfcluster/cluster/verdict.py reads them back with the verdict).
Where the run ended before its workers did anything, or the saved logs pass where the live
verdict did not, the report says so in a failing case of its own. Standard library only.
"""

from pathlib import Path
from xml.etree import ElementTree

SUITE = "tfcluster.verify"


def write(path: Path, *, status: int, judged: str | None, ran: bool) -> None:
    """Writes the report for a run that ended with `status`: the verifier's JUnit (`judged`) if it
    gave one, for a cluster that was brought up (`ran`)."""
    if judged is None:
        why = "left no worker's log to judge" if ran else "before its workers had run"
        _write(path, _suite([("scripts/run", f"the run ended with exit status {status} {why}")]))
        return
    report = ElementTree.fromstring(judged)
    if status != 0 and int(report.get("failures", "0")) == 0:
        # The live verdict failed where the saved logs pass (a verifier stopped, say): the gate wins.
        case = ElementTree.SubElement(report, "testcase", classname="tfcluster.cluster", name="scripts/run")
        message = f"scripts/run exited {status} (the live verdict), though the workers' logs pass"
        ElementTree.SubElement(case, "failure", message=message).text = message
        report.set("tests", str(int(report.get("tests", "0")) + 1))
        report.set("failures", "1")
    _write(path, report)


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

"""The verdict as a record: the one JSON line the verifier prints (`{"event": "verdict", ...}`),
and that record as JUnit XML.

The verifier service prints its record beside its table, so that whoever drove the run (the
host's `Cluster.run()`, `scripts/run --junit`) reads the live verdict itself, as data, rather than
judging the workers' logs a second time. `scripts/verify --json` prints the same record alone.
"""

import json
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable

EVENT = "verdict"
SUITE = "tfcluster.verify"


# Compose's `name  | ` before a line of a service's log (`docker compose up`, `logs` without
# --no-log-prefix); nothing else may come before a record.
_PREFIX = re.compile(r"^[\w.-]+\s+\| ")


def found_in(lines: Iterable[str]) -> dict | None:
    """The last verdict record among `lines` (a log, with or without Compose's `name  | ` prefixes).

    A record is a whole line of its own: one quoted inside another line (a worker's last words,
    shown in the verifier's table) is not the verdict, whatever it says.
    """
    found = None
    for line in lines:
        text = _PREFIX.sub("", line, count=1)
        if not text.startswith('{"event": "verdict"'):
            continue
        try:
            record = json.loads(text)
        except ValueError:
            continue  # A line cut short (a verifier killed mid-write) is no verdict.
        if record.get("event") == EVENT:
            found = record
    return found


def junit(record: dict) -> str:
    """One test case per worker, one for the workers' model states, one for what each one's input
    delivered (skipped when it was not observed, or the record is older) and one for their metrics."""
    workers = record.get("workers", [])
    synchronization = record.get("synchronization", {})
    state_differences = synchronization.get("differences", [])
    data = record.get("data") or {}
    differences = record.get("differences", [])
    failures = (
        sum(1 for worker in workers if worker.get("problem"))
        + bool(state_differences)
        + bool(data.get("problems"))
        + bool(differences)
    )
    suite = ElementTree.Element("testsuite", name=SUITE, tests=str(len(workers) + 3), failures=str(failures))
    for worker in workers:
        case = ElementTree.SubElement(suite, "testcase", classname="tfcluster.worker", name=worker["name"])
        if worker.get("problem"):
            ElementTree.SubElement(case, "failure", message=worker["problem"]).text = worker["problem"]
    states = ElementTree.SubElement(suite, "testcase", classname="tfcluster.cluster", name="model states identical")
    if state_differences:
        text = "\n".join(state_differences)
        ElementTree.SubElement(states, "failure", message=state_differences[0]).text = text
    elif synchronization.get("proven"):
        ElementTree.SubElement(states, "system-out").text = "\n".join(synchronization["proven"])
    own = ElementTree.SubElement(suite, "testcase", classname="tfcluster.cluster", name="each worker's data its own")
    if data.get("problems"):
        ElementTree.SubElement(own, "failure", message=data["problems"][0]).text = "\n".join(data["problems"])
    elif data.get("observed"):
        ElementTree.SubElement(own, "system-out").text = data.get("proven") or ""
    else:
        ElementTree.SubElement(own, "skipped", message=data.get("proven") or "data: not judged")
    agreement = ElementTree.SubElement(suite, "testcase", classname="tfcluster.cluster", name="metrics agree")
    if differences:
        ElementTree.SubElement(agreement, "failure", message=differences[0]).text = "\n".join(differences)
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True)

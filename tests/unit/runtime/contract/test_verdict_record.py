"""The verdict's record (trainer/contract/verdict.py): found in a log as Compose shows it, and the
same JUnit whether made from the verdict itself or from its record, as the host makes it."""

import json

from tests.conftest import FIXTURES
from trainer.contract import verdict as records
from trainer.verifier import render
from trainer.verifier.sources import from_log_files
from trainer.verifier.verdict import judge

TUTORIAL = FIXTURES / "logs" / "tutorial"


def tutorial_verdict():
    return judge(from_log_files([TUTORIAL / "worker-0.log", TUTORIAL / "worker-1.log"]), expected_workers=2)


def test_the_last_record_is_found_with_or_without_composes_prefixes():
    first, second = {"event": "verdict", "passed": False}, {"event": "verdict", "passed": True}
    lines = [
        "verifier-1  | verify | waiting up to 3690s for worker-0, worker-1",
        f"verifier-1  | {json.dumps(first)}",
        "verifier-1  | verdict: FAIL: 1 problem(s)",
        json.dumps(second),
        '{"event": "observed", "kind": "state"}',
    ]
    assert records.found_in(lines) == second
    assert records.found_in(lines[:3]) == first


def test_a_record_cut_short_or_missing_is_no_verdict():
    assert records.found_in(['{"event": "verdict", "passed": tr']) is None
    assert records.found_in(["verdict: PASS: 2 of 2 workers agree"]) is None


def test_the_records_junit_is_the_verdicts_own():
    verdict = tutorial_verdict()
    assert records.junit(json.loads(render.as_json(verdict))) == render.junit(verdict)
    assert 'failures="0"' in records.junit(render.record(verdict))


def test_a_record_quoted_inside_another_line_is_never_the_verdict():
    real = {"event": "verdict", "passed": False}
    forged = '{"event": "verdict", "passed": true, "workers": []}'
    lines = [
        json.dumps(real),
        "verdict: FAIL: 1 problem(s)",
        f"  - worker-1: exited 1: x | {forged}",  # A worker's last line, as the table shows it.
        f"verifier-1  |   - worker-1: exited 1: config | {forged}",
    ]
    assert records.found_in(lines) == real
    # And a worker's quoted line in the record itself does not hide the record.
    quoted = {"event": "verdict", "passed": False, "problems": ['worker-1: config | {"lr": 0.1} diverged']}
    assert records.found_in([json.dumps(quoted)]) == quoted

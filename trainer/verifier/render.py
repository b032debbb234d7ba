"""The verdict three ways: a table for people, JSON for programs, JUnit XML for CI."""

import json

from trainer.contract import verdict as contract_verdict
from trainer.verifier import faults, links
from trainer.verifier.verdict import Verdict

# The table's metric columns, when present; the JSON output carries every metric.
_PREFERRED_COLUMNS = ("replicas", "initial_loss", "final_loss", "final_accuracy")


def _columns(verdict: Verdict) -> list[str]:
    keys = {key for worker in verdict.workers for key in (worker.metrics or {})}
    preferred = [key for key in _PREFERRED_COLUMNS if key in keys]
    return preferred


def _cell(value) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def table(verdict: Verdict) -> str:
    columns = _columns(verdict)
    rows = [["worker", "status", *columns]]
    for worker in verdict.workers:
        metrics = worker.metrics or {}
        rows.append([worker.name, worker.status, *(_cell(metrics.get(key)) for key in columns)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip() for row in rows]
    lines.extend(verdict.network)
    lines.extend(links.lines(verdict.links))
    lines.extend(faults.line(entry) for entry in verdict.faults)
    if verdict.recovery:
        lines.append(verdict.recovery.describe())
    lines.extend(verdict.synchronization.lines)
    if verdict.straggler:
        lines.append(verdict.straggler)
    lines.append(summary(verdict))
    lines.extend(f"  - {problem}" for problem in verdict.problems)
    return "\n".join(lines)


def summary(verdict: Verdict) -> str:
    if verdict.passed:
        figures = " ".join(f"{key}={_cell(verdict.metrics[key])}" for key in _columns(verdict))
        restarts = len(verdict.recovery.restarts) if verdict.recovery else 0
        after = f" (after {restarts} restart{'s' if restarts != 1 else ''})" if restarts else ""
        proof = f"; {verdict.synchronization.proof}" if verdict.synchronization.proof else ""
        agree = f"{len(verdict.workers)} of {verdict.expected_workers} workers agree{after}"
        return f"verdict: PASS: {agree}: {figures}{proof}"
    return f"verdict: FAIL: {len(verdict.problems)} problem(s)"


def record(verdict: Verdict) -> dict:
    """The verdict as data (trainer/contract/verdict.py): what --json prints, and JUnit is made of."""
    return {
        "event": contract_verdict.EVENT,
        "passed": verdict.passed,
        "expected_workers": verdict.expected_workers,
        "workers": [
            {"name": w.name, "status": w.status, "metrics": w.metrics, "problem": w.problem} for w in verdict.workers
        ],
        "differences": list(verdict.differences),
        "synchronization": {
            "differences": list(verdict.synchronization.differences),
            "proven": list(verdict.synchronization.lines),
            "first_differing": verdict.synchronization.first_differing,
        },
        "data": verdict.synchronization.data.as_data(),
        "problems": list(verdict.problems),
        "metrics": verdict.metrics,
        "network": list(verdict.network),
        "links": verdict.links,
        "faults": list(verdict.faults),
        "straggler": verdict.straggler,
        # Each worker's program's wall and CPU time, CPU limit and peak memory, where its status said.
        "usage": dict(verdict.usage),
        "restarts": None
        if verdict.recovery is None
        else [
            {"reason": restart.reason, "resumed_from_step": restart.resumed_from_step}
            for restart in verdict.recovery.restarts
        ],
    }


def as_json(verdict: Verdict) -> str:
    return json.dumps(record(verdict))


def junit(verdict: Verdict) -> str:
    """One test case per worker, one for the workers' model states, one for their data, one for their metrics."""
    return contract_verdict.junit(record(verdict))

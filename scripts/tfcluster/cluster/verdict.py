"""The verdict as data, read back once the cluster has stopped: what `Cluster.run()` returns and
what `--junit` writes.

Each worker's exit code and log (`docker compose ps`, `docker compose logs`) are judged by the
verifier's saved-logs mode, which fails a worker that exited non-zero as the live verdict does
(trainer/verifier/given_exits.py): one call gives the verdict as JSON and, with --junit, as JUnit
XML. The host talks to the verifier as a process, in data; it imports none of it. Where the run
ended before its workers did anything, or the saved logs pass where the live verdict did not, the
JUnit report says so in a failing case of its own (tfcluster/ci/junit.py).
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tfcluster.ci import junit

VERDICT_EVENT = "verdict"


def read_back(execution, junit_file: str | None) -> None:
    """Sets `execution.verdict` and `execution.logs` from what the run left; writes `junit_file`,
    whatever the run's end (a CI job's report must fail whenever its gate does)."""
    status = execution.status if execution.status is not None else 1
    workers = execution.plan.names if execution.ran else []
    with tempfile.TemporaryDirectory(prefix="tfcluster-verdict-") as directory:
        folder = Path(directory)
        report = folder / "verdict.xml"
        try:
            logs = saved_logs(execution, folder, workers) if workers else []
            execution.verdict = judged(logs, folder, execution.root, report if junit_file else None)
            execution.logs = {path.stem: path.read_text(encoding="utf-8", errors="replace") for path in logs}
            if junit_file:
                text = report.read_text(encoding="utf-8") if report.exists() else None
                junit.write(Path(junit_file), status=status, judged=text, ran=bool(workers))
        except Exception as error:  # The report must be written all the same: a CI job reads it.
            if junit_file:
                junit.write_failure(Path(junit_file), status, f"its report failed: {error}")
            else:
                raise


def saved_logs(execution, folder: Path, workers: list[str]) -> list[Path]:
    """Each worker's log and the exit codes, saved in `folder`; none if no worker has a container."""
    compose = execution.compose()
    listed = compose.compose("ps", "--all", "--format", "{{.Service}} {{.ExitCode}}", *workers, timeout=None)
    if listed.returncode != 0 or not listed.stdout.strip():
        return []
    (folder / "exit-codes.txt").write_text(listed.stdout, encoding="utf-8")
    logs = []
    for worker in workers:
        log = compose.compose("logs", "--no-color", "--no-log-prefix", worker, timeout=None)
        path = folder / f"{worker}.log"
        path.write_text(log.stdout, encoding="utf-8")
        logs.append(path)
    return logs


def judged(logs: list[Path], folder: Path, root: Path, report: Path | None) -> dict | None:
    """The verifier's verdict on the saved logs, as its JSON record; None if there were no logs."""
    if not logs:
        return None
    verify = [sys.executable, "-m", "trainer.verifier", *map(str, logs), "--json"]
    verify += ["--exit-codes-from", str(folder / "exit-codes.txt")]
    verify += ["--junit", str(report)] if report else []
    # Its table was printed live by the verifier service already: not twice.
    environment = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run(verify, cwd=root, env=environment, capture_output=True, text=True)
    records = [line for line in result.stdout.splitlines() if line.startswith("{")]
    for line in reversed(records):
        record = json.loads(line)
        if record.get("event") == VERDICT_EVENT:
            return record
    return None

"""The verdict as data, read back once the cluster has stopped: what `Cluster.run()` returns and
what `--junit` writes.

The verifier service prints its verdict as a record (trainer/contract/verdict.py) beside its
table: that record, from the verifier's log, is the run's verdict, the live one, with each
worker's status, metrics and problem; --junit's XML is made from it. For the API's Run, each
worker's log is read beside it. Nothing is judged a second time. Where the run ended before its workers did anything,
or before the verifier gave a verdict, the report says so in a failing case of its own
(tfcluster/ci/junit.py).
"""

from pathlib import Path

from tfcluster.ci import junit
from tfcluster.cluster.compose import VERDICT_SERVICE
from trainer.contract import verdict as records


def read_back(execution, junit_file: str | None) -> None:
    """Sets `execution.verdict` and `execution.logs` from what the run left; writes `junit_file`,
    whatever the run's end (a CI job's report must fail whenever its gate does)."""
    status = execution.exit_status
    try:
        if execution.ran and not execution.collected:
            execution.verdict, execution.logs = _read(execution)
        if junit_file:
            junit.write(Path(junit_file), status=status, record=execution.verdict, ran=execution.ran)
    except Exception as error:  # The report must be written all the same: a CI job reads it.
        if not junit_file:
            raise
        junit.write_failure(Path(junit_file), status, f"its report failed: {error}")


def _read(execution) -> tuple[dict | None, dict[str, str]]:
    """The verifier's record of its verdict, and each worker's log, from the stopped containers."""
    compose = execution.compose()
    verifier_log = compose.logs(VERDICT_SERVICE)
    # The workers' logs only for whoever asked for them (the API's Run): --junit needs the verdict alone.
    workers = execution.plan.names if execution.plan.collects else []
    return records.found_in(verifier_log.splitlines()), {worker: compose.logs(worker) for worker in workers}

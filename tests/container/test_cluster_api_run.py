"""`Cluster(...).run()` from Python, on real containers: the verdict comes back as data."""

import os

import pytest
from tfcluster import Cluster
from tfcluster.cluster.compose import unique_name

pytestmark = [pytest.mark.container, pytest.mark.usefixtures("docker")]


def run_and_tear_down(**settings: str):
    """A two-worker cluster of its own (a unique Compose project), always taken down after."""
    cluster = Cluster(name=unique_name("tfc-test"), environ={**os.environ, **settings})
    try:
        return cluster.run()
    finally:
        cluster.down()


@pytest.mark.timeout(420)
def test_a_run_from_python_returns_each_workers_status_metrics_and_the_synchronization_proof():
    run = run_and_tear_down()
    assert (run.status, run.passed, run.ran) == (0, True, True), run.problems
    assert list(run.workers) == ["worker-0", "worker-1"]
    for worker in run.workers.values():
        assert worker.status == "exited 0" and worker.problem is None
        assert worker.metrics["replicas"] == 2 and "final_loss" in worker.metrics
    # The same figures on both (each names its own worker).
    figures = [{k: v for k, v in worker.metrics.items() if k != "worker"} for worker in run.workers.values()]
    assert figures[0] == figures[1]
    proven = run.verdict["synchronization"]["proven"]
    assert any(line.startswith("state:") for line in proven), proven
    assert set(run.logs) == {"worker-0", "worker-1"} and all(run.logs.values())


@pytest.mark.timeout(420)
def test_a_failing_run_from_python_names_the_workers_and_their_problem():
    run = run_and_tear_down(TRAIN_BATCH_SIZE="0")
    assert run.status == 7 and not run.passed
    for worker in run.workers.values():
        assert "TRAIN_BATCH_SIZE" in (worker.problem or ""), worker
    assert run.problems

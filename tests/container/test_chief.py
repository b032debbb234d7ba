"""A cluster whose TF_CONFIG names worker 0 `chief`, as TFJob, AI Platform and Vertex write it
(trainer/contract/cluster.py): the launchers accept it, the program gets it in that form, and
MultiWorkerMirroredStrategy trains with the chief as worker 0, to a PASS."""

import json

import pytest

from tests.container.conftest import override

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]

CLUSTER = {"chief": ["worker-0:12345"], "worker": ["worker-1:12345"]}
TASKS = {"worker-0": {"type": "chief", "index": 0}, "worker-1": {"type": "worker", "index": 0}}


def test_a_tf_config_with_a_chief_and_a_worker_trains_in_sync_to_a_pass(compose_project, tmp_path):
    configs = {name: {"TF_CONFIG": json.dumps({"cluster": CLUSTER, "task": task})} for name, task in TASKS.items()}
    project = compose_project(override(tmp_path, configs))
    result = project.verdict(timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "verdict: PASS: 2 of 2 workers agree: replicas=2 " in result.stdout
    assert "weights identical at 3 points" in result.stdout
    # Each strategy resolved the cluster in TFJob's form, the chief as the chief (the observer's record).
    for name, task in TASKS.items():
        log = project.logs(name)
        assert '"cluster":{"chief":["worker-0:12345"],"worker":["worker-1:12345"]}' in log, log[-2000:]
        assert f'"task":{{"type":"{task["type"]}","index":{task["index"]}}}' in log

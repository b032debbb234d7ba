"""A cluster whose TF_CONFIG names worker 0 `chief`, as TFJob, AI Platform and Vertex write it
(trainer/contract/cluster.py): the launchers accept it, the program gets it in that form, and
MultiWorkerMirroredStrategy trains with the chief as worker 0, to a PASS."""

import json

import pytest

from tests import browser
from tests.container.conftest import DIFFERING, assert_report_says_what_the_run_printed, override, report_of

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


def test_scripts_run_chief_gives_three_workers_tfjobs_form_from_the_shared_template_to_a_pass(scripts_run):
    # The harness's own setting (TF_CHIEF=1, the template's): worker-0 the chief, two workers.
    project = scripts_run("--chief", "--workers", "3")
    result = project.finish(timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "verdict: PASS: 3 of 3 workers agree: replicas=3 " in result.stdout
    assert "weights identical at 3 points" in result.stdout
    # Into a pipe, as into a CI log: plain text, none of Compose's colours or redrawn lines.
    assert "verifier-1 exited with code 0\n" in result.stdout
    assert not any(character in result.stdout + result.stderr for character in "\x1b\r")
    assert "all 3 workers agree on the cluster and settings after" in result.stdout
    assert "; worker-0 is TF_CONFIG's chief" in result.stdout
    expected = '"cluster":{"chief":["worker-0:12345"],"worker":["worker-1:12345","worker-2:12345"]}'
    # Each worker's strategy resolved it so (the observer's record, in the run's output).
    for name, task in {"worker-0": ("chief", 0), "worker-1": ("worker", 0), "worker-2": ("worker", 1)}.items():
        log = "\n".join(line for line in result.stdout.splitlines() if line.startswith(f"{name}-1  | "))
        assert f'{expected},"task":{{"type":"{task[0]}","index":{task[1]}}}' in log, log[-2000:]
    # Its report: three workers' epochs as they printed them, three points compared, nothing differing.
    data, opened = report_of(project, result.stderr)
    assert_report_says_what_the_run_printed(data, result.stdout)
    assert [len(worker["epochs"]) for worker in data["workers"]] == [3, 3, 3]
    assert data["verdict"]["passed"] and data["verdict"]["synchronization"]["first_differing"] is None
    assert browser.pixels(opened.screenshot, DIFFERING) == 0

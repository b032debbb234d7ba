"""Warm workers (scripts/run --warm, tfcluster/cluster/warm.py, trainer/zygote/) on real containers.

One warm cluster of its own runs a user's project (a copy of examples/custom-loop) again and again:
each edit shows in the next run, a run that fails leaves the zygotes usable, a change of
TF_USE_LEGACY_KERAS restarts them under the new key, and a warm run trains exactly what a cold run
of the same project trains, weights included. Taken down at the end, with nothing left.
"""

import json
import os
import shutil
import subprocess

import pytest
from tfcluster import Cluster
from tfcluster.cluster.compose import unique_name

from tests.conftest import ROOT

pytestmark = [pytest.mark.container, pytest.mark.usefixtures("docker")]

FORKED = "forked its program from the warm zygote"
RESTARTED = "the warm zygote restarts for this run: TF_USE_LEGACY_KERAS is unset in the zygote, '1' for the run"
# Printed by the project when its model module is imported: the edit, and which Keras `tf.keras` is.
PROBE = 'print("edit {n}: tf.keras is", tf.keras.Model.__module__.split(".")[0], flush=True)\n'


def final_states(run) -> dict[str, list]:
    """Each worker's model state at the program's end, as its observer recorded it (name, kind, hash)."""
    states = {}
    for worker, log in run.logs.items():
        records = [json.loads(line) for line in log.splitlines() if line.startswith('{"event":"observed"')]
        ends = [record for record in records if record.get("kind") == "state" and record.get("point") == "end"]
        states[worker] = ends[-1]["variables"]
    return states


def figures(run) -> dict:
    return {key: value for key, value in run.workers["worker-0"].metrics.items() if key != "worker"}


def leftovers(project: str) -> list[str]:
    label = f"label=com.docker.compose.project={project}"
    found = []
    for kind in ("container", "network", "volume"):
        listed = subprocess.run(
            ["docker", kind, "ls", *(["-a"] if kind == "container" else []), "-q", "--filter", label],
            capture_output=True,
            text=True,
            check=True,
        )
        found += [f"{kind} {item}" for item in listed.stdout.split()]
    return found


@pytest.mark.timeout(900)
def test_warm_runs_in_a_row_take_every_edit_survive_a_failure_and_a_keras_change_and_train_as_cold(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(ROOT / "examples" / "custom-loop", project)
    model = project / "loopdemo" / "model.py"
    original = model.read_text()
    name = unique_name("tfc-test")
    environ = dict(os.environ)

    def run(*, warm=True, **env):
        return Cluster(name=name, project=str(project), env=env, warm=warm, environ=environ).run()

    try:
        model.write_text(original + PROBE.format(n=1))
        first = run()
        assert first.passed, first.problems
        for worker, log in first.logs.items():
            assert FORKED in log, worker
            assert "edit 1: tf.keras is keras" in log, worker

        model.write_text(original + PROBE.format(n=2))
        second = run()
        assert second.passed, second.problems
        assert all("edit 2: tf.keras is keras" in log and "edit 1" not in log for log in second.logs.values())
        assert figures(second) == figures(first)

        model.write_text(original + "raise SystemExit(3)\n")
        failed = run()
        assert failed.status == 7, failed.problems
        assert all(worker.status == "exited 3" for worker in failed.workers.values()), failed.workers

        model.write_text(original + PROBE.format(n=3))
        after_failure = run()
        assert after_failure.passed, after_failure.problems
        assert all(FORKED in log and "edit 3" in log for log in after_failure.logs.values())
        assert figures(after_failure) == figures(first)
        assert final_states(after_failure) == final_states(first)

        legacy = run(TF_USE_LEGACY_KERAS="1")
        assert legacy.passed, legacy.problems
        for worker, log in legacy.logs.items():
            assert RESTARTED in log, worker
            assert FORKED in log and "edit 3: tf.keras is tf_keras" in log, worker
        legacy_again = run(TF_USE_LEGACY_KERAS="1")
        assert legacy_again.passed, legacy_again.problems
        assert all("restarts" not in log and FORKED in log for log in legacy_again.logs.values())

        cold = run(warm=False)
        assert cold.passed, cold.problems
        assert all(FORKED not in log for log in cold.logs.values())
        assert figures(cold) == figures(first)
        assert final_states(cold) == final_states(first)  # The same weights, bit for bit.
    finally:
        Cluster(name=name, environ=environ).down()
        assert Cluster(name=name, environ=environ).warm_down() == 0
    assert leftovers(f"{name}-warm") == []

"""Warm workers (scripts/run --warm, tfcluster/cluster/warm.py, trainer/zygote/) on real containers.

One warm cluster of its own runs a user's project (a copy of examples/custom-loop) again and again:
each edit shows in the next run, a run that fails leaves the zygotes usable, a change of
TF_USE_LEGACY_KERAS restarts them under the new key, and a warm run trains exactly what a cold run
of the same project trains, weights included. Taken down at the end, with nothing left.
"""

import json
import os
import re
import shutil
import signal
import subprocess

import pytest
from tfcluster import Cluster
from tfcluster.cluster.compose import unique_name

from tests.conftest import ROOT
from tests.container.conftest import running, warm_down

pytestmark = [pytest.mark.container, pytest.mark.usefixtures("docker")]

FORKED = "forked its program from the warm zygote"
RESTARTED = "the warm zygote restarts for this run: TF_USE_LEGACY_KERAS is unset in the zygote, '1' for the run"
# Printed by the project when its model module is imported: the edit, and which Keras `tf.keras` is.
PROBE = 'print("edit {n}: tf.keras is", tf.keras.Model.__module__.split(".")[0], flush=True)\n'
# A program whose TFRecord writer is never closed, as programs leave them: its 1000 bytes (1016 as
# a record) reach the file only as Python's shutdown destroys the writer. The project's next run
# says how much the file holds.
WRITER = (
    "python -c \"import tensorflow as tf; writer = tf.io.TFRecordWriter('/tmp/tfc-test-records'); "
    "writer.write(b'x' * 1000)\""
)
RECORDS = (
    "import os as _os\n"
    "_LEFT = '/tmp/tfc-test-records'\n"
    "print('records left:', _os.path.getsize(_LEFT) if _os.path.exists(_LEFT) else 'none', flush=True)\n"
)
LEFT = "records left: 1016\n"


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
    # Its files in the checkout too: the warm file, the kept configuration, the lock.
    return found + [f"folder {path}" for path in [ROOT / ".tfcluster" / project] if path.exists()]


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

        model.write_text(original + PROBE.format(n=3) + RECORDS)
        after_failure = run()
        assert after_failure.passed, after_failure.problems
        assert all(FORKED in log and "edit 3" in log for log in after_failure.logs.values())
        assert figures(after_failure) == figures(first)
        assert final_states(after_failure) == final_states(first)

        written = Cluster(name=name, project=str(project), command=WRITER, warm=True, environ=environ).run()
        assert all(worker.status == "exited 0" for worker in written.workers.values()), written.workers
        legacy = run(TF_USE_LEGACY_KERAS="1")
        assert legacy.passed, legacy.problems
        for worker, log in legacy.logs.items():
            assert RESTARTED in log, worker
            assert FORKED in log and "edit 3: tf.keras is tf_keras" in log, worker
            # What the forked writer's program wrote as Python's shutdown destroyed it, as `python` does.
            assert LEFT in log, worker
        legacy_again = run(TF_USE_LEGACY_KERAS="1")
        assert legacy_again.passed, legacy_again.problems
        assert all("restarts" not in log and FORKED in log for log in legacy_again.logs.values())

        # SIGHUP (a closed terminal, some CI runners) mid-training stops the warm cluster, as
        # SIGINT and SIGTERM do: no forked program is left training.
        hung_up = subprocess.Popen(
            [str(ROOT / "scripts" / "run"), "--warm", "--name", name, "--project", str(project)]
            + ["--env", "LOOP_EPOCHS=300"],
            cwd=ROOT,
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            said = []
            for line in hung_up.stdout:
                said.append(line)
                if "custom-loop: epoch 2/300" in line:
                    break
            hung_up.send_signal(signal.SIGHUP)
            said += hung_up.stdout.readlines()
            assert hung_up.wait(timeout=60) == 129, "".join(said)[-3000:]
        finally:
            if hung_up.poll() is None:
                hung_up.kill()
        assert f"run: received SIGHUP: stopping the warm cluster {name}-warm" in "".join(said), "".join(said)[-3000:]
        assert running(f"{name}-warm") == []

        cold = run(warm=False)
        assert cold.passed, cold.problems
        assert all(FORKED not in log for log in cold.logs.values())
        assert figures(cold) == figures(first)
        assert final_states(cold) == final_states(first)  # The same weights, bit for bit.
    finally:
        Cluster(name=name, environ=environ).down()
        assert warm_down(name, environ) == 0
    assert leftovers(f"{name}-warm") == []


def round_trips(run) -> list[tuple[str, str, float]]:
    """(worker, peer, rtt in ms) of every link the shapers measured for this run."""
    found = []
    for line in run.verdict.get("network", []):
        worker = line.split(":", 1)[0]
        found += [(worker, peer, float(rtt)) for peer, rtt in re.findall(r"(worker-\d+) rtt ([\d.]+) ms", line)]
    return found


@pytest.mark.timeout(600)
def test_warm_workers_run_shaped_measured_again_each_run_and_leave_no_rule_behind():
    name = unique_name("tfc-test")
    environ = dict(os.environ)

    def run(**settings):
        return Cluster(name=name, warm=True, network="wan", environ=environ, **settings).run()

    def rules_left() -> dict[str, list[str]]:
        left = {}
        for shaper in ("shaper-0", "shaper-1"):
            container = f"{name}-warm-{shaper}-1"
            listed = [
                subprocess.run(
                    ["docker", "exec", container, "iptables", "-w", "-t", table, "-S"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                for table in ("filter", "nat")
            ]
            left[shaper] = [rule for text in listed for rule in text.splitlines() if "tfcluster" in rule]
        return left

    try:
        first = run()
        assert first.passed, first.problems
        links = round_trips(first)
        assert sorted(link[:2] for link in links) == [("worker-0", "worker-1"), ("worker-1", "worker-0")], links
        assert all(40 <= rtt <= 60 for *_, rtt in links), links
        # Between runs the warm workers' namespaces hold nothing of the last run's shaping.
        assert rules_left() == {"shaper-0": [], "shaper-1": []}

        second = run(faults=["cut worker-1 at step 3 for 1s"])
        assert second.passed, second.problems
        # The same warm cluster, forked again; each shaper exec'd again for this run.
        assert all(FORKED in second.logs[worker] for worker in ("worker-0", "worker-1")), second.logs.keys()
        assert all("shaping in place" in second.logs[shaper] for shaper in ("shaper-0", "shaper-1"))
        links = round_trips(second)
        assert len(links) == 2 and all(40 <= rtt <= 60 for *_, rtt in links), links  # Shaped and measured again.
        [fault] = second.verdict["faults"]
        assert fault["reached"] and fault["healed_at"] - fault["cut_at"] >= 1.0, fault
        assert rules_left() == {"shaper-0": [], "shaper-1": []}
    finally:
        Cluster(name=name, environ=environ).down()
        assert warm_down(name, environ) == 0
    assert leftovers(f"{name}-warm") == []

"""The keeper's decisions (trainer/keeper/keeper.py), against a stand-in for the Docker API."""

import datetime
import json
import time

import docker.errors
import pytest
import requests.exceptions

from trainer.contract.exitcodes import ExitCode
from trainer.keeper.keeper import Keeper


class FakeContainer:
    def __init__(self, cluster, name):
        self.cluster, self.name = cluster, name
        self.labels = {"com.docker.compose.service": name}
        self.exit_code, self.running, self.started = None, True, 1
        self.finished_at = "0001-01-01T00:00:00Z"

    @property
    def attrs(self):
        started = "2026-11-30T00:00:00Z" if self.started else "0001-01-01T00:00:00Z"
        exit_code = 0 if self.exit_code is None else self.exit_code
        state = {"Running": self.running, "ExitCode": exit_code, "StartedAt": started, "OOMKilled": False}
        return {"State": {**state, "FinishedAt": self.finished_at}}

    def end(self, exit_code, at="2026-11-30T00:00:01Z"):
        self.running, self.exit_code, self.finished_at = False, exit_code, at

    def kill(self):
        self.cluster.calls.append(("kill", self.name))
        if self.running:
            self.end(137)

    def wait(self, condition, timeout=None):
        assert condition == "not-running" and timeout is not None
        if self.running:  # An engine that never reports the kill done: the SDK's read times out.
            raise requests.exceptions.ReadTimeout(f"read timed out after {timeout}s")

    def start(self):
        self.cluster.calls.append(("start", self.name))
        self.running, self.exit_code, self.started = True, None, self.started + 1
        self.cluster.on_start(self)

    def logs(self, **_):
        return iter([b"resumed\n"])


class FakeCluster:
    """Two workers; `script` ends them, one step per event the keeper waits for."""

    def __init__(self, script, on_start=lambda container: None, shapers=0):
        self.workers = [FakeContainer(self, "worker-0"), FakeContainer(self, "worker-1")]
        self.shapers = [FakeContainer(self, f"shaper-{index}") for index in range(shapers)]
        self.script, self.on_start, self.calls = list(script), on_start, []
        self.containers = self

    def list(self, all, filters, ignore_removed=False):
        assert all and "com.docker.compose.project=project" in filters["label"]
        if "tfcluster.role=shaper" in filters["label"]:
            return self.shapers
        assert "tfcluster.role=worker" in filters["label"]
        return self.workers

    def events(self, decode, filters, until=None):
        assert filters["event"] == "die"
        cluster = self
        cluster.until = until

        class Events:
            def __iter__(self):
                return self

            def __next__(self):
                if not cluster.script:
                    raise StopIteration
                cluster.script.pop(0)(cluster)
                return {"status": "die"}

            def close(self):
                pass

        return Events()


# FakeContainer.end's time, as the keeper records it.
FIRST_END = datetime.datetime(2026, 11, 30, 0, 0, 1, tzinfo=datetime.UTC).timestamp()


def ends(**codes):
    return lambda cluster: [w.end(codes[w.name]) for w in cluster.workers if w.name in codes]


def keeper(cluster, limit=3):
    return Keeper(cluster, "project", limit=limit, recorder=None)


def test_a_cluster_that_finishes_well_is_left_alone():
    cluster = FakeCluster([ends(**{"worker-0": 0, "worker-1": 0})])
    kept = keeper(cluster)
    assert kept.run() == ExitCode.OK
    assert kept.restarts == [] and cluster.calls == []


def test_a_killed_worker_restarts_every_worker_once(capsys):
    def finish_after_restart(container):
        if container.name == "worker-1":
            cluster.script.append(ends(**{"worker-0": 0, "worker-1": 0}))

    cluster = FakeCluster([ends(**{"worker-1": 137})], on_start=finish_after_restart)
    kept = keeper(cluster)
    assert kept.run() == ExitCode.OK
    assert kept.restarts == [
        {"failed": {"worker-1": 137}, "reason": "worker-1 exited 137 (killed by SIGKILL)", "failed_at": FIRST_END}
    ]
    # The survivor is killed too (TensorFlow takes no single restarted worker), then both start.
    assert cluster.calls == [("kill", "worker-0"), ("kill", "worker-1"), ("start", "worker-0"), ("start", "worker-1")]
    output = capsys.readouterr().out
    assert "keeper | restart 1 of at most 3: worker-1 exited 137 (killed by SIGKILL); restarting every worker" in output
    assert "keeper | every worker finished well, after 1 restart(s)" in output


def test_network_shapers_are_stopped_with_the_workers_and_started_after_them(capsys):
    def finish_after_restart(container):
        if container.name == "shaper-1":
            cluster.script.append(ends(**{"worker-0": 0, "worker-1": 0}))

    cluster = FakeCluster([ends(**{"worker-1": 5})], on_start=finish_after_restart, shapers=2)
    # A shaper ends by itself when its worker does: the kill of a stopped one is a no-op.
    cluster.shapers[1].end(0)
    assert keeper(cluster).run() == ExitCode.OK
    # Each shaper joins its worker's namespace as it starts: a new one, made by the worker's start.
    kills, starts = cluster.calls[:4], cluster.calls[4:]
    assert sorted(kills) == [("kill", name) for name in ("shaper-0", "shaper-1", "worker-0", "worker-1")]
    assert starts == [("start", name) for name in ("worker-0", "worker-1", "shaper-0", "shaper-1")]
    assert "restarting every worker and their 2 network shapers" in capsys.readouterr().out


def test_at_the_limit_it_stops_every_worker_and_gives_up(capsys):
    cluster = FakeCluster([ends(**{"worker-1": 1})])
    kept = keeper(cluster, limit=0)
    assert kept.run() == ExitCode.GAVE_UP
    assert ("start", "worker-0") not in cluster.calls and ("kill", "worker-0") in cluster.calls
    assert not cluster.workers[0].running
    assert (
        "keeper | gave up: worker-1 exited 1, after 0 restart(s) (TF_RESTART_LIMIT=0); stopping every worker"
        in capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("code", "why"), [(2, "a configuration error"), (3, "a failed check"), (9, "out of memory"), (12, "a full volume")]
)
def test_a_failure_a_restart_would_repeat_is_not_restarted(capsys, code, why):
    cluster = FakeCluster([ends(**{"worker-0": code})])
    kept = keeper(cluster)
    assert kept.run() == ExitCode.GAVE_UP
    assert kept.restarts == [] and not any(call[0] == "start" for call in cluster.calls)
    assert f"gave up: worker-0 exited {code}: {why}, which a restart would only repeat" in capsys.readouterr().out


def test_a_lost_event_stream_is_no_hang(capsys):
    cluster = FakeCluster([])  # No event will ever come, and the workers still run.
    assert keeper(cluster).run() == ExitCode.GAVE_UP
    assert "gave up: the Docker engine closed its event stream" in capsys.readouterr().out


def test_the_restart_names_the_first_failure_first(capsys):
    def both_end(cluster):
        survivor, killed = cluster.workers
        killed.end(137, at="2026-11-30T00:00:01.5Z")
        survivor.end(5, at="2026-11-30T00:00:01.50000001Z")

    def finish_after_restart(container):
        if container.name == "worker-1":
            cluster.script.append(ends(**{"worker-0": 0, "worker-1": 0}))

    cluster = FakeCluster([both_end], on_start=finish_after_restart)
    kept = keeper(cluster)
    assert kept.run() == ExitCode.OK
    assert kept.restarts[0]["reason"] == "worker-1 exited 137 (killed by SIGKILL), worker-0 exited 5"


def test_an_exit_code_that_names_no_signal_is_shown_plainly():
    from trainer.keeper.keeper import WorkerState

    assert WorkerState("worker-0", False, 255, False).describe() == "exited 255"
    assert WorkerState("worker-0", False, 143, False).describe() == "exited 143 (killed by SIGTERM)"


def test_a_failing_engine_ends_the_keeper_with_one_line(capsys, monkeypatch):
    import docker.errors

    from trainer.keeper import __main__ as keeper_module

    def refuses():
        raise docker.errors.APIError("409 Conflict: cannot start")

    cluster = FakeCluster([ends(**{"worker-1": 137})])
    cluster.workers[0].start = refuses
    cluster.get = lambda name: type("Own", (), {"labels": {keeper_module.PROJECT_LABEL: "project"}})()
    monkeypatch.setattr(keeper_module.docker, "from_env", lambda: cluster)
    monkeypatch.delenv("TF_RESULTS_DIR", raising=False)
    assert keeper_module.main() == ExitCode.GAVE_UP
    assert "keeper | gave up: the Docker engine failed: 409 Conflict: cannot start" in capsys.readouterr().out


def test_a_bad_restart_limit_is_recorded_for_the_verifier(tmp_path, capsys, monkeypatch):
    from trainer.keeper import __main__ as keeper_module

    def never():
        raise AssertionError("the Docker engine is not asked with a bad setting")

    monkeypatch.setattr(keeper_module.docker, "from_env", never)
    monkeypatch.setenv("TF_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("TF_RESTART_LIMIT", "many")
    assert keeper_module.main() == ExitCode.CONFIG_ERROR
    message = "keeper: config error: `TF_RESTART_LIMIT` ('many') must be an integer"
    assert capsys.readouterr().err == message + "\n"
    status = json.loads((tmp_path / "keeper.status").read_text())
    assert (status["state"], status["exit_code"], status["reason"]) == ("exited", ExitCode.CONFIG_ERROR, message)


def test_the_restart_limit_from_the_environment_is_the_keepers(tmp_path, capsys, monkeypatch):
    from trainer.keeper import __main__ as keeper_module

    cluster = FakeCluster([ends(**{"worker-1": 1})])
    cluster.get = lambda name: type("Own", (), {"labels": {keeper_module.PROJECT_LABEL: "project"}})()
    monkeypatch.setattr(keeper_module.docker, "from_env", lambda: cluster)
    monkeypatch.setenv("TF_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("TF_RESTART_LIMIT", "0")
    assert keeper_module.main() == ExitCode.GAVE_UP
    assert "(TF_RESTART_LIMIT=0)" in capsys.readouterr().out
    assert json.loads((tmp_path / "keeper.status").read_text())["limit"] == 0


def test_its_wait_for_a_death_ends_at_the_runs_deadline_and_it_stops_every_worker(capsys):
    # The engine's stream ends at `until`, with the workers still running (a cluster that hangs).
    cluster = FakeCluster([])
    deadline = time.time() - 1
    kept = Keeper(cluster, "project", limit=3, recorder=None, deadline=deadline)
    assert kept.run() == ExitCode.GAVE_UP
    assert cluster.until == int(deadline)
    assert ("kill", "worker-0") in cluster.calls and ("kill", "worker-1") in cluster.calls
    assert "keeper | gave up: the run's deadline passed with workers still running" in capsys.readouterr().out


def test_a_killed_worker_the_engine_never_reports_stopped_ends_the_wait_with_its_name():
    cluster = FakeCluster([ends(**{"worker-1": 1})])
    stuck = cluster.workers[0]
    stuck.kill = lambda: cluster.calls.append(("kill", stuck.name))  # The kill is taken, and never done.
    with pytest.raises(docker.errors.DockerException, match="worker-0 was not stopped 30s after SIGKILL"):
        keeper(cluster, limit=0).run()

"""The API from another process (tfcluster/commands/driven.py): JSON in, the Run as JSON out."""

import json

import pytest
from tfcluster.cluster.result import Run
from tfcluster.commands import driven


def _drive(tmp_path, request: dict) -> tuple[int, dict]:
    (tmp_path / "request.json").write_text(json.dumps(request))
    status = driven.main([str(tmp_path / "request.json"), str(tmp_path / "result.json")])
    return status, json.loads((tmp_path / "result.json").read_text())


@pytest.mark.parametrize(
    ("request_", "line"),
    [
        ({"action": "start"}, "run: action 'start' is not one of run, down, warm_down\n"),
        ({"action": "run", "cluster": {"wrokers": 2}}, "run: Cluster got an unexpected keyword argument 'wrokers'\n"),
        ({"action": "run", "cluster": {"workers": 0}}, None),
    ],
    ids=["action", "field", "value"],
)
def test_a_request_that_is_not_one_is_refused_in_one_line_with_exit_2(tmp_path, capsys, request_, line):
    status, result = _drive(tmp_path, request_)
    assert status == 2
    assert result == {"status": 2, "ran": False, "verdict": None, "logs": {}, "name": None, "report": None}
    error = capsys.readouterr().err
    assert error == line if line else error.startswith("run: ") and error.count("\n") == 1


def test_down_takes_the_named_cluster_down(tmp_path, monkeypatch):
    downed = []
    monkeypatch.setattr(driven.Cluster, "down", lambda cluster: downed.append(cluster.name) or 0)
    status, result = _drive(tmp_path, {"action": "down", "cluster": {"name": "tfc-pytest-1-1"}})
    assert (status, downed) == (0, ["tfc-pytest-1-1"])
    assert Run(**result) == Run(0, False, None, name="tfc-pytest-1-1")


def test_run_returns_the_runs_data(tmp_path, monkeypatch):
    ran = Run(7, True, {"passed": False, "problems": ["x"]}, {"worker-0": "log"}, "tfc-pytest-1-2")
    monkeypatch.setattr(driven.Cluster, "run", lambda cluster: ran)
    status, result = _drive(tmp_path, {"action": "run", "cluster": {"name": "tfc-pytest-1-2", "workers": 3}})
    assert status == 7 and Run(**result) == ran

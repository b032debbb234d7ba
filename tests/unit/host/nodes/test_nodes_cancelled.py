"""scripts/nodes run, stopped while its stack trains (SIGTERM, as a cancelled CI job sends): the
stack is removed and the JUnit report fails with how the run ended (tfcluster/nodes/operations.py)."""

import argparse
from xml.etree import ElementTree

import pytest
from tfcluster.nodes import operations


def test_a_stopped_run_removes_its_stack_and_fails_its_report(monkeypatch, tmp_path):
    removed = []
    monkeypatch.setattr(operations.node_hosts, "present_nodes", lambda: ["node-1", "node-2"])
    monkeypatch.setattr(operations, "workers_and_fault", lambda _arguments, _nodes: (2, None))
    monkeypatch.setattr(operations, "set_up", lambda _image: None)
    monkeypatch.setattr(operations.node_registry, "push", lambda _image: (False, None))
    monkeypatch.setattr(operations.node_registry, "reference", lambda image: image)
    monkeypatch.setattr(operations.node_swarm, "render", lambda *_: "{}")
    monkeypatch.setattr(operations.node_swarm, "deploy", lambda _manager, _stack: None)
    monkeypatch.setattr(operations.node_swarm, "remove", lambda manager: removed.append(manager) or True)

    def terminated(*_arguments, **_options):
        raise SystemExit(operations.TERMINATED)  # What the SIGTERM handler raises (commands/nodes.py).

    monkeypatch.setattr(operations.node_swarm, "watch", terminated)
    report = tmp_path / "verdict.xml"
    arguments = argparse.Namespace(image=None, command=None, timeout=60, fault_after=None, junit=report)
    with pytest.raises(SystemExit) as stopped:
        operations.run(arguments)
    assert stopped.value.code == 143
    assert removed == ["node-1"]
    suite = ElementTree.fromstring(report.read_text())
    assert suite.get("failures") == "1"
    assert "the run ended with exit status 143 before the verifier gave a verdict" in report.read_text()

"""A host's link is removed even when the kernel removes it first (tfcluster/nodes/hosts.py)."""

import subprocess

import pytest
from tfcluster.nodes import hosts


def answering(*codes: int):
    """Stands in for `ip`: each call gets the next exit status; the calls are recorded."""
    calls, remaining = [], list(codes)

    def ip(*arguments, check=True):
        calls.append(arguments[:2])
        return subprocess.CompletedProcess(["ip", *arguments], remaining.pop(0), stdout="", stderr="Cannot find device")

    return ip, calls


def test_a_link_that_vanishes_between_the_look_and_the_delete_is_gone_as_asked(monkeypatch):
    # Deleting the namespace took the veth's other end with it a moment later.
    ip, calls = answering(0, 1, 1)
    monkeypatch.setattr(hosts, "_ip", ip)
    hosts._remove_link("tfcn-registry")
    assert calls == [("link", "show"), ("link", "del"), ("link", "show")]


def test_a_link_that_will_not_go_is_an_error(monkeypatch):
    ip, _calls = answering(0, 1, 0)
    monkeypatch.setattr(hosts, "_ip", ip)
    with pytest.raises(hosts.HostError, match="ip link del tfcn-node-2: Cannot find device"):
        hosts._remove_link("tfcn-node-2")


def test_no_link_is_nothing_to_do(monkeypatch):
    ip, calls = answering(1)
    monkeypatch.setattr(hosts, "_ip", ip)
    hosts._remove_link("tfcn-node-3")
    assert calls == [("link", "show")]

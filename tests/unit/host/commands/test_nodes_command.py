"""scripts/nodes without the machine: its command line, its faults' checks, its hosts' names.

Everything here is refused before the preflight (root, namespaces), so it runs anywhere, as any
user; tests/container/test_nodes.py runs the rest on real namespaces and engines.
"""

import subprocess

import pytest
from tfcluster.nodes import hosts as node_hosts
from tfcluster.nodes import operations

from tests.conftest import ROOT

NODES = str(ROOT / "scripts" / "nodes")


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (("bogus",), "nodes: unknown command 'bogus' (commands: up, run, status, kill, cut, mend, shape, down)"),
        (("stauts",), "nodes: unknown command 'stauts' (did you mean status?)"),
        (("up", "0"), "nodes: up: the number of nodes must be a whole number from 1 to 8, got '0'"),
        (("up", "9"), "nodes: up: the number of nodes must be a whole number from 1 to 8, got '9'"),
        (("run", "--rate", "1mbit"), "nodes: --rate is not an option of run"),
        (("up", "--fault", "kill=node-2"), "nodes: --fault is not an option of up"),
        (("status", "node-1"), "nodes: status takes no 'node-1'"),
        (("run", "--timeout", "0"), "nodes: --timeout (0) must be a positive number of seconds"),
        (("run", "--workers", "two"), "nodes: --workers must be a whole number from 1 to 8, got 'two'"),
        (("run", "--bogus"), "nodes: unknown argument '--bogus'"),
        (("run", "--timeout", "nan"), "nodes: --timeout (nan) must be a positive number of seconds"),
        (("run", "--command", '"x'), "nodes: --command '\"x' cannot be split as a shell would: No closing quotation"),
        (("run", "--command", ""), "nodes: --command is empty"),
        (("run", "--image", "My Model"), "nodes: --image 'My Model' is not an image name"),
        (("shape", "node-2"), "nodes: shape needs --rate and/or --delay, or --clear alone"),
        (
            ("shape", "node-2", "--rate", "1mbit", "--clear"),
            "nodes: shape needs --rate and/or --delay, or --clear alone",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(arguments, line):
    done = subprocess.run([NODES, *arguments], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (2, ""), done
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(line), done.stderr


PRESENT = [node_hosts.node(1), node_hosts.node(2), node_hosts.node(3)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kill=node-2", None),
        ("cut=node-3", None),
        (
            "kill=node-1",
            "--fault kill=node-1: node-1 is the swarm's only manager, which the run needs; fault another node",
        ),
        ("kill=node-4", "--fault: no node 'node-4' (the nodes: node-1, node-2, node-3)"),
        ("freeze=node-2", "--fault 'freeze=node-2' must be KIND=NODE with KIND one of kill, cut, e.g. kill=node-2"),
        ("node-2", "--fault 'node-2' must be KIND=NODE with KIND one of kill, cut, e.g. kill=node-2"),
    ],
)
def test_a_fault_names_a_kind_and_a_node_other_than_the_manager(text, message):
    if message is None:
        fault = operations.parse_fault(text, PRESENT)
        assert (fault.kind, fault.host.name) == tuple(text.split("="))
        assert fault.named == {"kill": "host down", "cut": "host partitioned"}[fault.kind]
        return
    with pytest.raises(operations.Refused) as refused:
        operations.parse_fault(text, PRESENT)
    assert str(refused.value) == message


def test_the_run_waits_as_long_as_the_workers_may_live():
    assert operations.default_timeout({}) == 60 + 3600 + 30
    assert operations.default_timeout({"TF_JOIN_TIMEOUT": "10", "TF_RUN_TIMEOUT": "100"}) == 140
    with pytest.raises(operations.Refused, match="TF_RUN_TIMEOUT='soon' must be a number of seconds"):
        operations.default_timeout({"TF_RUN_TIMEOUT": "soon"})


def test_every_host_has_names_the_kernel_takes_and_an_address_of_its_own():
    hosts = [node_hosts.node(number) for number in range(1, operations.MAX_NODES + 1)] + [node_hosts.REGISTRY]
    assert all(len(host.link) <= 15 for host in hosts)  # IFNAMSIZ less its terminating zero.
    assert len({host.address for host in hosts}) == len(hosts)
    assert all(host.address in node_hosts.SUBNET and host.address != node_hosts.MACHINE_ADDRESS for host in hosts)
    assert str(node_hosts.node(2).address) == "10.213.0.12"
    assert [node_hosts.node_number(name) for name in ("node-2", "node-10", "node-02", "registry", "node-")] == [
        2,
        10,
        None,
        None,
        None,
    ]

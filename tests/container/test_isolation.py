"""The worker network is sealed both ways: TF's unauthenticated gRPC port is reachable only from the
cluster's own network, and a worker reaches nothing outside it.

Every probe has a positive control beside it (the same probe from where it must succeed), so a
probe that could never connect would fail the test rather than pass it.
"""

import json
import subprocess
import uuid

import pytest

from tests.container.conftest import wait_for_line

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]

IMAGE = "tfcluster:latest"
# A TCP connect with a short timeout: exit 0 if it connects, 1 with the reason if it does not.
PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
except OSError as error:
    print(f"unreachable: {error!r}")
    sys.exit(1)
print("connected")
"""


def probe_from_network(network: str, host: str, port: int) -> subprocess.CompletedProcess:
    """Connects from a fresh container on `network` (not a worker) to host:port."""
    return subprocess.run(
        ["docker", "run", "--rm", "--network", network, "--entrypoint", "python", IMAGE, "-c", PROBE, host, str(port)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def address_on(container: str, network: str) -> str:
    inspected = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True)
    return json.loads(inspected.stdout)[0]["NetworkSettings"]["Networks"][network]["IPAddress"]


@pytest.fixture
def training(compose_project):
    """A two-worker cluster training until the test ends (torn down by compose_project)."""
    project = compose_project(environment={"TRAIN_EPOCHS": "100000"})
    project.compose("up", "--detach", "worker-0", "worker-1")
    project.wait_for_line("worker-0", "train | epoch:   5/")
    return project


@pytest.fixture
def outside_listener():
    """A TCP listener in a container on Docker's default bridge, outside the worker network."""
    name = f"tfc-test-outside-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["docker", "run", "-d", "--name", name, "--entrypoint", "python", IMAGE, "-m", "http.server", "8000"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    try:
        wait_for_line(name, "Serving HTTP on", timeout=60)  # http.server says so once it listens.
        yield address_on(name, "bridge")
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)


def test_the_grpc_port_is_reachable_only_from_the_cluster_network(training):
    network = f"{training.name}_cluster"
    worker = address_on(training.container("worker-0"), network)
    inside = probe_from_network(network, worker, 12345)
    assert inside.returncode == 0, inside.stdout + inside.stderr  # The control: the port is open.
    outside = probe_from_network("bridge", worker, 12345)
    assert outside.returncode == 1, outside.stdout + outside.stderr
    assert "unreachable" in outside.stdout
    # Nor is it published on the host.
    assert training.state("worker-0")["NetworkSettings"]["Ports"] in ({}, None, {"12345/tcp": None})


def test_a_worker_reaches_nothing_outside_the_cluster_network(training, outside_listener):
    # The control: the listener answers from its own network.
    assert probe_from_network("bridge", outside_listener, 8000).returncode == 0
    from_worker = subprocess.run(
        ["docker", "exec", training.container("worker-0"), "python", "-c", PROBE, outside_listener, "8000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert from_worker.returncode == 1, from_worker.stdout + from_worker.stderr
    assert "unreachable" in from_worker.stdout
    # ...while its peer, on the same network, is reachable from it.
    peer = subprocess.run(
        ["docker", "exec", training.container("worker-0"), "python", "-c", PROBE, "worker-1", "12345"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert peer.returncode == 0, peer.stdout + peer.stderr

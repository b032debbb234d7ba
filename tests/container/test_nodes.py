"""Real hosts on one machine: Docker engines in network namespaces as Swarm nodes (scripts/nodes).

End to end, as a user runs it: the nodes come up, the cluster trains across 3 nodes and across 2,
a host killed and a host cut off mid-training give their bounded verdicts, a shaped link is
measured, and `down` leaves nothing behind, which the last test proves by looking for every kind
of thing `up` makes. The module's nodes are shared by its tests (up is idempotent: each test says
how many it needs) and are taken down at its end whatever happened.

Skipped, with the reason, where this machine cannot make network namespaces or is not root.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from tfcluster.nodes import hosts as node_hosts

from tests.conftest import ROOT

pytestmark = [pytest.mark.container, pytest.mark.timeout(600)]

NODES = str(ROOT / "scripts" / "nodes")
RUN_TIMEOUT = 300  # Each command's own bound: a run here takes 10 to 30 s, a first `up` about a minute.
LONG_TRAINING = {"TRAIN_EPOCHS": "40"}  # So that a fault lands mid-training (4 steps an epoch).
MID_TRAINING = "epoch:   5/"
# The seed's figures (docs/swarm.md, README.md), as the verifier prints them.
TWO_WORKERS = "replicas=2 initial_loss=0.7459 final_loss=0.4168 final_accuracy=0.8281"
THREE_WORKERS = "replicas=3 initial_loss=0.7448 final_loss=0.4296 final_accuracy=0.8542"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:  # A process that ended while the list was read.
        return ""


def _cannot_make_hosts() -> str | None:
    if os.geteuid() != 0:
        return "scripts/nodes needs root (network namespaces, links, engines), and the tests do not run as root"
    probe = subprocess.run(["unshare", "--net", "--uts", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"this machine cannot make network namespaces: {probe.stderr.strip()}"
    return None


def nodes(*arguments: str, environment: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT):
    return subprocess.run(
        [NODES, *arguments],
        cwd=ROOT,
        env={**os.environ, **(environment or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def placement(output: str) -> dict[str, tuple[str, str]]:
    """The run's node table as {worker: (node, status)}."""
    rows = re.findall(r"^nodes \| (node-\d+)\s+\S+\s+\S+\s+.*?\s(worker-\d+)\s+(\S+(?: \d+)?)$", output, re.MULTILINE)
    return {worker: (node, status) for node, worker, status in rows}


@pytest.fixture(scope="module")
def hosts(docker):
    problem = _cannot_make_hosts()
    if problem:
        pytest.skip(problem)
    yield
    nodes("down", timeout=180)  # Whatever the tests did; the last test proves what down leaves.


def test_not_root_is_one_line_and_exit_2():
    if os.geteuid() != 0:
        pytest.skip("needs root, to become another user")
    # The commands copied where another user can read them: a checkout may be in a folder only
    # root can enter (mktemp -d makes one).
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)
        # The host package (scripts/tfcluster/) and the contract it shares with the roles (trainer/).
        for part in ("scripts", "trainer"):
            shutil.copytree(ROOT / part, Path(folder) / part, ignore=shutil.ignore_patterns("__pycache__"))
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", f"{folder}/scripts/nodes", "status"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert done.returncode == 2, done
    assert done.stderr.strip() == (
        "nodes: needs root: it makes network namespaces, links and Docker engines (run it with sudo)"
    )


def test_no_namespaces_allowed_is_one_line_and_exit_2(tmp_path):
    if _cannot_make_hosts():
        pytest.skip("needs a machine that can make namespaces, to take that away")
    # Root without CAP_SYS_ADMIN, as in a container that is not privileged: no namespace can be made.
    done = subprocess.run(
        ["setpriv", "--bounding-set=-sys_admin", NODES, "up", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done
    assert done.stderr.strip() == (
        "nodes: cannot make network namespaces here: unshare --net: unshare: unshare failed: Operation not permitted"
    )
    assert done.stdout == ""


def test_three_nodes_train_three_workers_one_on_each(hosts):
    up = nodes("up", "3")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "nodes | swarm of 3: node-1 manages, node-2, node-3" in up.stdout
    assert re.search(r"tfcluster:latest (pushed to|already in) the registry 10\.213\.0\.2:5000", up.stdout)
    done = nodes("run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"verdict: PASS: 3 of 3 workers agree: {THREE_WORKERS}" in done.stdout
    placed = placement(done.stdout)
    assert sorted(placed) == ["worker-1", "worker-2", "worker-3"], done.stdout
    assert sorted(node for node, _ in placed.values()) == ["node-1", "node-2", "node-3"]  # One on each.
    assert {status for _, status in placed.values()} == {"exited 0"}


def test_a_host_killed_mid_training_is_lost_and_its_peers_exit_5(hosts):
    assert nodes("up", "3").returncode == 0
    done = nodes("run", "--fault", "kill=node-3", "--fault-after", MID_TRAINING, environment=LONG_TRAINING)
    assert done.returncode == 7, done.stdout + done.stderr
    placed = placement(done.stdout)
    lost = [worker for worker, (node, _) in placed.items() if node == "node-3"]
    assert len(lost) == 1, done.stdout
    assert f"  - {lost[0]}: lost: its host node-3 went down: its engine does not answer" in done.stdout
    survivors = [worker for worker in placed if worker != lost[0]]
    assert [placed[worker][1] for worker in survivors] == ["exited 5", "exited 5"], done.stdout
    # Each lost a peer and names it: the dead host's worker, or a survivor that stopped first. The
    # launcher says it either way: the program ended on its own after losing one, or was stopped.
    reasons = [
        re.search(rf"  - {worker}: exited 5: .*(?:losing peer\(s\):|lost peer\(s\)) (.*)$", done.stdout, re.M)
        for worker in survivors
    ]
    assert all(reasons), done.stdout
    assert any(f"{lost[0]}:12345" in reason.group(1) for reason in reasons), done.stdout
    bound = re.search(
        r"fault: host down: kill node-3 at [\d.]+s; every worker ended or was lost ([\d.]+)s later", done.stdout
    )
    assert bound and float(bound.group(1)) < 30, done.stdout
    status = nodes("status")
    assert re.search(r"node-3\s+10\.213\.0\.13\s+down\s+cut", status.stdout), status.stdout
    # Dead with its containers: not one of their processes is left in the host's cgroups. Whether the
    # containers' own cgroup folders are left too depends on whether a shim outlived the engine long
    # enough to remove them (the fresh-clone CI run once found none left): not this test's to say.
    dead = node_hosts.node(3)
    assert node_hosts.cgroup_processes(dead) == set()
    assert node_hosts.engine_pid(dead) is None
    # up brings the dead host back, and the cluster trains on all three again.
    back = nodes("up", "3")
    assert back.returncode == 0 and "node-3 (10.213.0.13): engine up" in back.stdout, back.stdout + back.stderr


def test_a_host_cut_off_mid_training_each_side_loses_the_other_then_mends(hosts):
    assert nodes("up", "3").returncode == 0
    done = nodes("run", "--fault", "cut=node-2", "--fault-after", MID_TRAINING, environment=LONG_TRAINING)
    assert done.returncode == 7, done.stdout + done.stderr
    placed = placement(done.stdout)
    alone = next(worker for worker, (node, _) in placed.items() if node == "node-2")
    # The cut-off worker is still heard (its engine answers on the machine's socket): it exited 5 too.
    assert {status for _, status in placed.values()} == {"exited 5"}, done.stdout
    assert re.search(rf"  - {alone}: exited 5: .*(?:losing peer\(s\):|lost peer\(s\)) worker-\d:12345", done.stdout)
    bound = re.search(
        r"fault: host partitioned: cut node-2 at [\d.]+s; every worker ended or was lost ([\d.]+)s later", done.stdout
    )
    assert bound and float(bound.group(1)) < 30, done.stdout
    assert "node-2 stays cut off: scripts/nodes mend node-2 brings it back" in done.stdout
    mended = nodes("mend", "node-2")
    assert mended.returncode == 0 and "node-2's link is up" in mended.stdout
    again = nodes("run")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"verdict: PASS: 3 of 3 workers agree: {THREE_WORKERS}" in again.stdout


def test_two_nodes_train_two_workers_to_the_seed_figures(hosts, tmp_path):
    assert nodes("up", "3").returncode == 0  # Then one fewer: up takes the third down.
    up = nodes("up", "2")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "nodes | node-3 taken down" in up.stdout
    assert "tfcn-node-3" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    done = nodes("run", "--junit", str(tmp_path / "verdict.xml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"verdict: PASS: 2 of 2 workers agree: {TWO_WORKERS}" in done.stdout
    assert sorted(node for node, _ in placement(done.stdout).values()) == ["node-1", "node-2"]
    junit = (tmp_path / "verdict.xml").read_text()
    assert 'failures="0"' in junit and "worker-2" in junit
    too_many = nodes("run", "--workers", "3")
    assert too_many.returncode == 2
    assert too_many.stderr.strip() == (
        "nodes: --workers 3: there are 2 nodes, and a node runs one worker (scripts/nodes up 3)"
    )
    manager = nodes("run", "--fault", "kill=node-1")
    assert manager.returncode == 2 and "node-1 is the swarm's only manager" in manager.stderr


def test_your_project_baked_into_an_image_goes_to_the_nodes_and_trains_across_them(hosts, scripts_run):
    # Built by scripts/run --bake as a user would, under a tag of this test's own, removed after.
    tag = f"tfc-test-nodes:{uuid.uuid4().hex[:12]}"
    bake = scripts_run("--project", "examples/custom-loop", "--bake", "--tag", tag)
    try:
        baked = bake.finish()
        assert baked.returncode == 0, baked.stdout[-2000:] + baked.stderr
        up = nodes("up", "2", "--image", tag)
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"{tag} pushed to the registry 10.213.0.2:5000" in up.stdout
        done = nodes("run", "--image", tag)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "verdict: PASS: 2 of 2 workers agree: replicas=2 " in done.stdout
        assert "custom-loop: epoch 4/4" in (ROOT / ".tfcluster" / "nodes" / "worker-1.log").read_text()
        # Every node ran the registry's copy of the image, pulled by its own engine.
        for host in ("node-1", "node-2"):
            images = subprocess.run(
                [
                    "docker",
                    "--host",
                    f"unix:///run/tfcluster-nodes/{host}/docker.sock",
                    "images",
                    "--format",
                    "{{.Repository}}:{{.Tag}}",
                ],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert f"10.213.0.2:5000/{tag}" in images.stdout.split(), images.stdout
    finally:
        subprocess.run(["docker", "image", "rm", "--force", tag], capture_output=True, timeout=120)


def test_a_shaped_link_holds_traffic_back_and_the_run_still_agrees(hosts):
    assert nodes("up", "2").returncode == 0
    try:
        shaped = nodes("shape", "node-2", "--rate", "200kbit")
        assert shaped.returncode == 0 and "node-2's link: up, shaped: rate 200kbit" in shaped.stdout, shaped
        done = nodes("run")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"verdict: PASS: 2 of 2 workers agree: {TWO_WORKERS}" in done.stdout
        counted = re.search(r"node-2's shaped link passed (\d+) bytes in (\d+) packets, (\d+) held back", done.stdout)
        assert counted, done.stdout
        assert int(counted.group(1)) > 10_000 and int(counted.group(3)) > 0  # Gradients went through, throttled.
        delayed = nodes("shape", "node-2", "--delay", "20ms")
        if delayed.returncode == 0:  # A kernel with netem.
            assert "delay 20ms" in delayed.stdout
        else:
            assert delayed.returncode == 2
            assert delayed.stderr.startswith("nodes: cannot delay node-2's link by 20ms: tc: "), delayed.stderr
            assert "shaped" not in nodes("status").stdout  # Refused whole: the link is as it was.
    finally:
        cleared = nodes("shape", "node-2", "--clear")
    assert cleared.returncode == 0 and "node-2's link: up\n" in cleared.stdout


def test_down_leaves_no_engine_namespace_link_mount_cgroup_rule_or_data(hosts):
    before = subprocess.run(
        ["docker", "info", "--format", "{{json .Swarm.LocalNodeState}}"], capture_output=True, text=True
    )
    done = nodes("down", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"down: \d node\(s\), the registry, the bridge and the firewall rule removed", done.stdout)
    assert not [
        n
        for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        if n.startswith("tfcn")
    ]
    links = json.loads(subprocess.run(["ip", "-json", "link"], capture_output=True, text=True).stdout)
    assert not [link["ifname"] for link in links if link["ifname"].startswith("tfcn")]
    mounts = Path("/proc/self/mounts").read_text()
    assert "tfcluster-nodes" not in mounts
    assert not [group for number in range(1, 9) for group in node_hosts.cgroups(node_hosts.node(number))]
    in_node_cgroups = [path for path in Path("/proc").glob("[0-9]*/cgroup") if "tfcluster-node-" in _read(path)]
    assert not in_node_cgroups
    assert "tfcluster-nodes" not in subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True).stdout
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "/run/tfcluster-nodes" not in processes and "docker-registry serve" not in processes
    assert not Path("/var/lib/tfcluster-nodes").exists() and not Path("/run/tfcluster-nodes").exists()
    # The machine's own engine is as it was, and a second down has nothing to do.
    after = subprocess.run(
        ["docker", "info", "--format", "{{json .Swarm.LocalNodeState}}"], capture_output=True, text=True
    )
    assert after.stdout == before.stdout
    again = nodes("down")
    assert again.returncode == 0 and "nothing to take down" in again.stdout

"""Hosts on one machine: each a network namespace on one bridge, most of them running a Docker engine.

A host here is what a cloud gives you, made of the kernel's own parts (docs/nodes.md):

- its network: a namespace `tfcn-NAME` with one link, `eth0`, whose other end `tfcn-NAME` is
  plugged into the bridge `tfcn0`, the "datacenter network" (10.213.0.0/24; the machine itself
  is 10.213.0.1 on it). Cutting that link partitions the host; tbf on it shapes it.
- its engine: the machine's own `dockerd`, started inside the namespace (entered with nsenter,
  because `ip netns exec` remounts /sys and dockerd then finds no devices cgroup) and in a UTS
  namespace of its own, so that its hostname, and its swarm node's name, is NAME. Everything it
  keeps is its own: data root, exec root, socket, pidfile, containerd namespaces, and the cgroup
  its containers run under (`tfcluster-NAME`), which is how a killed host's containers are found.

Everything made is named after the prefix, and only what is so named is ever removed. Root only.
Host only, standard library only.
"""

import contextlib
import dataclasses
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

PREFIX = "tfcn"
BRIDGE = f"{PREFIX}0"
SUBNET = ipaddress.ip_network("10.213.0.0/24")
MACHINE_ADDRESS = SUBNET[1]  # The machine's own address on the bridge.
REGISTRY_ADDRESS = SUBNET[2]
FIRST_NODE = 10  # node-K is 10.213.0.(10 + K).
STATE_ROOT = Path("/var/lib/tfcluster-nodes")
RUN_ROOT = Path("/run/tfcluster-nodes")
NETNS_ROOT = Path("/run/netns")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# Bridged frames pass the host's iptables FORWARD chain (br_netfilter), whose policy Docker sets to
# DROP; this rule, and only it, lets the hosts reach one another. Its comment is how it is found.
FORWARD_RULE = ["FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-m", "comment", "--comment", "tfcluster-nodes", "-j", "ACCEPT"]
ENGINE_READY_TIMEOUT = 60.0  # Seen here: 0.3 s with nothing to restore, 8 s on another machine.
ENGINE_STOP_GRACE = 15.0  # dockerd stops its containers first (10 s each unless they end sooner).
KILL_ROUNDS = 5  # A process may start while the others are killed (a shim, say): kill again.


class HostError(Exception):
    """Something the machine would not do, in one line that says what and why."""


class Unable(HostError):
    """This machine cannot have hosts at all: not root, a tool missing, namespaces not allowed."""


@dataclasses.dataclass(frozen=True)
class Host:
    name: str  # node-1, registry
    address: ipaddress.IPv4Address

    @property
    def namespace(self) -> str:
        return f"{PREFIX}-{self.name}"

    @property
    def link(self) -> str:
        # The host-side end of its link; an interface name has at most 15 characters.
        return f"{PREFIX}-{self.name}"

    @property
    def state(self) -> Path:
        return STATE_ROOT / self.name

    @property
    def run(self) -> Path:
        return RUN_ROOT / self.name

    @property
    def socket(self) -> Path:
        return self.run / "docker.sock"

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket}"

    @property
    def cgroup(self) -> str:
        return f"tfcluster-{self.name}"


def node(number: int) -> Host:
    return Host(f"node-{number}", SUBNET[FIRST_NODE + number])


REGISTRY = Host("registry", REGISTRY_ADDRESS)


def node_number(name: str) -> int | None:
    """K of `node-K`, or None for any other name."""
    head, _, number = name.partition("-")
    return int(number) if head == "node" and number.isdigit() and not number.startswith("0") else None


# -- what is there -----------------------------------------------------------------------------------


def namespaces() -> list[str]:
    """The network namespaces made here, by name."""
    if not NETNS_ROOT.is_dir():
        return []
    return sorted(entry.name for entry in NETNS_ROOT.iterdir() if entry.name.startswith(f"{PREFIX}-"))


def present_nodes() -> list[Host]:
    """The nodes whose namespace exists, in order."""
    numbers = (node_number(name.removeprefix(f"{PREFIX}-")) for name in namespaces())
    return [node(number) for number in sorted(n for n in numbers if n is not None)]


def links() -> list[str]:
    """The links made here, the bridge included."""
    shown = json.loads(_ip("-json", "link", "show").stdout or "[]")
    return sorted(entry["ifname"] for entry in shown if entry["ifname"].startswith(PREFIX))


def link_state(host: Host) -> str:
    """`up`, `cut` (down) or `missing`, with the shaping on it if any (`up, shaped: rate 1Mbit`)."""
    shown = _ip("-json", "link", "show", host.link, check=False)
    if shown.returncode != 0:
        return "missing"
    flags = json.loads(shown.stdout)[0]["flags"]
    state = "up" if "UP" in flags else "cut"
    shaping = shaped(host)
    return f"{state}, shaped: {shaping}" if shaping else state


def engine_pid(host: Host) -> int | None:
    """The pid of the host's dockerd, if it is running."""
    try:
        pid = int((host.run / "docker.pid").read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    # A pid is reused: it is the engine only if it is a dockerd with this host's socket.
    return (
        pid if command and command[0].endswith(b"dockerd") and str(host.socket).encode() in b" ".join(command) else None
    )


def engine_answers(host: Host, timeout: float = 5.0) -> bool:
    try:
        return docker(host, "version", "--format", "{{.Server.Version}}", timeout=timeout).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def mounts_under(*roots: Path) -> list[str]:
    """Mount points under these folders, deepest first (the order they can be unmounted in)."""
    points = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1].replace("\\040", " ")
        if any(point == str(root) or point.startswith(f"{root}/") for root in roots):
            points.append(point)
    return sorted(points, key=lambda point: point.count("/"), reverse=True)


def cgroups(host: Host) -> list[Path]:
    """The host's cgroup in every controller, once each (cpu and cpuacct may be one folder).

    Its engine is given an absolute parent, so they are at each controller's top; a relative one
    lands under the engine's own cgroup, which is looked under too, for what an older version left."""
    found = {(CGROUP_ROOT / host.cgroup).resolve()} if (CGROUP_ROOT / host.cgroup).is_dir() else set()  # cgroup v2
    for controller in (entry for entry in CGROUP_ROOT.iterdir() if entry.is_dir()):
        own = _own_cgroup(controller.name)
        for base in {controller, controller / own.lstrip("/")} if own else {controller}:
            candidate = base / host.cgroup
            if candidate.is_dir():
                found.add(candidate.resolve())
    return sorted(found)


def _own_cgroup(controller: str) -> str:
    """This process's cgroup path in one controller, from /proc/self/cgroup (v1)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    return ""


def cgroup_processes(host: Host) -> set[int]:
    """Every process in the host's cgroups: its containers'."""
    pids = set()
    for group in cgroups(host):
        for procs in group.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):  # A container's cgroup may go while it is read.
                pids |= {int(pid) for pid in procs.read_text().split()}
    return pids


def anything_made(most: int) -> bool:
    return bool(
        namespaces()
        or links()
        or forward_rule_present()
        or RUN_ROOT.exists()
        or STATE_ROOT.exists()
        or leftover_nodes(most)
    )


def leftover_nodes(most: int) -> list[Host]:
    """Nodes of which only cgroups are left (their namespace gone): a host killed, then interrupted."""
    present = present_nodes()
    return [node(number) for number in range(1, most + 1) if node(number) not in present and cgroups(node(number))]


def forward_rule_present() -> bool:
    return subprocess.run(["iptables", "-C", *FORWARD_RULE], capture_output=True).returncode == 0


# -- making ------------------------------------------------------------------------------------------


def preflight() -> None:
    """Root, the tools, and namespaces allowed: else a HostError that says which is missing."""
    if os.geteuid() != 0:
        raise Unable("needs root: it makes network namespaces, links and Docker engines (run it with sudo)")
    missing = [
        tool
        for tool in ("ip", "tc", "iptables", "nsenter", "unshare", "docker", "dockerd", "fuse-overlayfs", "dpkg-deb")
        if not shutil.which(tool)
    ]
    if missing:
        raise Unable(
            f"missing on this machine: {', '.join(missing)} "
            "(Debian's iproute2, iptables, util-linux, docker.io, fuse-overlayfs)"
        )
    probe = subprocess.run(["unshare", "--net", "--uts", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise Unable(f"cannot make network namespaces here: unshare --net: {_last_line(probe.stderr)}")


def bring_up_network() -> None:
    """The bridge with the machine's address on it, and the one firewall rule; kept if there."""
    if _ip("link", "show", BRIDGE, check=False).returncode != 0:
        _ip("link", "add", BRIDGE, "type", "bridge")
    _ip("addr", "replace", f"{MACHINE_ADDRESS}/{SUBNET.prefixlen}", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")
    if not forward_rule_present():
        _run(["iptables", "-I", *FORWARD_RULE])


def bring_up_host(host: Host) -> None:
    """The host's namespace and its link to the bridge, up; what is already there is kept."""
    if host.namespace not in namespaces():
        _ip("netns", "add", host.namespace)
    if _ip("link", "show", host.link, check=False).returncode != 0:
        _ip("link", "add", host.link, "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
    _ip("link", "set", host.link, "master", BRIDGE, "up")
    _ip("-n", host.namespace, "addr", "replace", f"{host.address}/{SUBNET.prefixlen}", "dev", "eth0")
    _ip("-n", host.namespace, "link", "set", "eth0", "up")
    _ip("-n", host.namespace, "link", "set", "lo", "up")


def start_engine(host: Host, *, insecure_registry: str) -> float:
    """Starts the host's dockerd unless it runs; returns the seconds it took to answer."""
    if engine_pid(host) is not None and engine_answers(host):
        return 0.0
    stop_engine(host, grace=0)  # A dead engine's leftovers (mounts, shims) would stop a new one.
    host.run.mkdir(parents=True, exist_ok=True)
    host.state.mkdir(parents=True, exist_ok=True)
    # The machine's /etc/docker/daemon.json sets the data root and storage driver, which the
    # flags set too (dockerd refuses both at once): each engine reads a file of its own.
    config = host.run / "daemon.json"
    config.write_text(json.dumps({"insecure-registries": [insecure_registry]}) + "\n")
    command = [
        "nsenter", f"--net={NETNS_ROOT / host.namespace}",
        "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec dockerd "$@"', host.name,
        "--config-file", str(config),
        "--data-root", str(host.state / "docker"),
        "--exec-root", str(host.run / "exec"),
        "--pidfile", str(host.run / "docker.pid"),
        "--host", host.docker_host,
        "--containerd-namespace", host.namespace,
        "--containerd-plugins-namespace", f"{host.namespace}-plugins",
        "--storage-driver", "fuse-overlayfs",
        # cgroupfs, whatever the machine's engine uses: systemd's driver would take the parent
        # below for a slice's name.
        "--exec-opt", "native.cgroupdriver=cgroupfs",
        "--iptables=false",  # The machine's firewall stays the machine's; the nodes need none.
        # Absolute: a relative parent would be under the engine's own cgroup, which differs by
        # controller and by machine, and so would be hard to find when the host is killed.
        "--cgroup-parent", f"/{host.cgroup}",
    ]  # fmt: skip
    started = time.monotonic()
    with open(host.run / "dockerd.log", "ab") as log:
        engine = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    while not engine_answers(host, timeout=2.0):
        if engine.poll() is not None:
            raise HostError(
                f"{host.name}'s engine exited {engine.returncode}: {_last_line(_tail(host.run / 'dockerd.log'))}"
            )
        if time.monotonic() - started > ENGINE_READY_TIMEOUT:
            raise HostError(
                f"{host.name}'s engine did not answer within {ENGINE_READY_TIMEOUT:.0f}s "
                f"(its log: {host.run / 'dockerd.log'})"
            )
        time.sleep(0.1)
    return time.monotonic() - started


# -- taking down -------------------------------------------------------------------------------------


def stop_engine(host: Host, *, grace: float = ENGINE_STOP_GRACE) -> None:
    """Stops the host's engine (SIGTERM, then SIGKILL after `grace`), then everything it left:
    its processes, its containers' processes, its mounts. Nothing if nothing runs."""
    pid = engine_pid(host)
    if pid is not None and grace > 0:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    kill_processes(host)
    for point in mounts_under(host.state, host.run):
        subprocess.run(["umount", "--lazy", point], capture_output=True)


def kill_processes(host: Host) -> int:
    """SIGKILL to every process of the host: its engine first (else it would restart containerd),
    then those in its namespace (containerd, shims, fuse-overlayfs) and in its cgroup (its
    containers'), again until none is left. Returns how many there were."""
    killed: set[int] = set()
    engine = engine_pid(host)
    for _ in range(KILL_ROUNDS):
        pids = ({engine} if engine else set()) | cgroup_processes(host)
        if host.namespace in namespaces():
            listed = _ip("netns", "pids", host.namespace, check=False).stdout.split()
            pids |= {int(pid) for pid in listed if pid.isdigit()}
        pids = {pid for pid in pids if _alive(pid)}
        if not pids:
            return len(killed)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed |= pids
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        engine = None
    raise HostError(f"{host.name}: processes still there after {KILL_ROUNDS} rounds of SIGKILL")


def remove_host(host: Host) -> None:
    """The host gone: engine, processes, mounts, cgroups, namespace (and with it its link), files."""
    stop_engine(host)
    for group in cgroups(host):
        # Deepest first: a cgroup is removed with rmdir, and only once it has no children.
        for directory in sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(FileNotFoundError):
                directory.rmdir()
        with contextlib.suppress(FileNotFoundError):
            group.rmdir()
    if host.namespace in namespaces():
        _ip("netns", "del", host.namespace)
    _remove_link(host.link)
    for folder in (host.run, host.state):
        if folder.exists():
            shutil.rmtree(folder)


def _remove_link(name: str) -> None:
    """The link gone. Deleting a namespace takes its end of a veth pair with it and the kernel
    removes the other end a moment later, so the link may vanish between the look and the delete:
    only one still there after a failed delete is an error."""
    if _ip("link", "show", name, check=False).returncode != 0:
        return
    deleted = _ip("link", "del", name, check=False)
    if deleted.returncode != 0 and _ip("link", "show", name, check=False).returncode == 0:
        raise HostError(f"ip link del {name}: {_last_line(deleted.stderr)}")


def take_down_network() -> None:
    _remove_link(BRIDGE)
    while forward_rule_present():
        _run(["iptables", "-D", *FORWARD_RULE])
    for root in (RUN_ROOT, STATE_ROOT):
        if root.exists():
            for point in mounts_under(root):
                subprocess.run(["umount", "--lazy", point], capture_output=True)
            shutil.rmtree(root)


# -- faults ------------------------------------------------------------------------------------------


def kill(host: Host) -> int:
    """The host dies: every process of it killed at once, and its link goes dark (a dead host
    answers nothing, where a live kernel would refuse). Returns how many processes it had."""
    killed = kill_processes(host)
    _ip("link", "set", host.link, "down")
    return killed


def cut(host: Host) -> None:
    """The host partitioned: its link down; it runs on, alone."""
    _ip("link", "set", host.link, "down")


def mend(host: Host) -> None:
    """Its link up again (shaped as it was, if it was)."""
    _ip("link", "set", host.link, "up")


def shape(host: Host, *, rate: str | None, delay: str | None) -> None:
    """Its link shaped on both ends, so both ways: tbf for the rate; netem for the delay, which only
    a kernel with netem has. What tc refuses (a bad rate, no netem) is an Unable that names it,
    with the link left unshaped."""
    unshape(host)
    for prefix, device in (([], host.link), (["-n", host.namespace], "eth0")):
        parent = ["root"]
        steps = []
        if delay:
            steps.append(([*parent, "handle", "1:", "netem", "delay", delay], f"delay {host.name}'s link by {delay}"))
            parent = ["parent", "1:1"]
        if rate:
            # A burst of at least rate / HZ bytes, as tbf needs; 32 kbit is tc's own example.
            tbf = [*parent, "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms"]
            steps.append((tbf, f"limit {host.name}'s link to {rate}"))
        for arguments, what in steps:
            added = subprocess.run(
                ["tc", *prefix, "qdisc", "add", "dev", device, *arguments], capture_output=True, text=True
            )
            if added.returncode != 0:
                unshape(host)
                hint = " (this kernel may have no netem)" if "netem" in arguments and "unknown" in added.stderr else ""
                raise Unable(f"cannot {what}: tc: {_last_line(added.stderr)}{hint}")


def unshape(host: Host) -> None:
    subprocess.run(["tc", "qdisc", "del", "dev", host.link, "root"], capture_output=True)
    subprocess.run(["tc", "-n", host.namespace, "qdisc", "del", "dev", "eth0", "root"], capture_output=True)


def shaped(host: Host) -> str:
    """The shaping on the host's link, as `rate 1000kbit`, `delay 50ms` or both; nothing if none."""
    parts = []
    for qdisc in _qdiscs(host):
        options = qdisc.get("options", {})
        if qdisc.get("kind") == "tbf" and "rate" in options:
            parts.append(f"rate {options['rate'] * 8 // 1000}kbit")  # tc gives bytes per second.
        elif qdisc.get("kind") == "netem" and "delay" in options:
            parts.append(f"delay {options['delay']['delay'] * 1000:g}ms")  # tc gives seconds.
    return ", ".join(parts)


def shaping_counters(host: Host) -> dict[str, int]:
    """What tbf on the host's side has done: bytes and packets sent, packets held back (overlimits)."""
    for qdisc in _qdiscs(host, "-s"):
        if qdisc.get("kind") == "tbf":
            return {
                "bytes": qdisc.get("bytes", 0),
                "packets": qdisc.get("packets", 0),
                "overlimits": qdisc.get("overlimits", 0),
            }
    return {}


# -- helpers -----------------------------------------------------------------------------------------


def docker(
    host: Host, *arguments: str, timeout: float = 120, check: bool = False, input: str | None = None
) -> subprocess.CompletedProcess:
    """The docker CLI, talking to this host's engine."""
    command = ["docker", "--host", host.docker_host, *arguments]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, input=input)
    if check and completed.returncode != 0:
        raise HostError(f"{host.name}: docker {' '.join(arguments[:2])} failed: {_last_line(completed.stderr)}")
    return completed


def _qdiscs(host: Host, *options: str) -> list[dict]:
    shown = subprocess.run(["tc", *options, "-json", "qdisc", "show", "dev", host.link], capture_output=True, text=True)
    return json.loads(shown.stdout or "[]") if shown.returncode == 0 else []


def _ip(*arguments: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run(["ip", *arguments], check=check)


def _run(command: list[str], check: bool = True) -> subprocess.CompletedProcess:
    completed = subprocess.run(command, capture_output=True, text=True)
    if check and completed.returncode != 0:
        raise HostError(f"{' '.join(command)}: {_last_line(completed.stderr)}")
    return completed


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-2000:]
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"

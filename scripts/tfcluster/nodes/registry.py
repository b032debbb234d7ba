"""The image, to every node, the way a real cluster gets it: from a registry on the datacenter network.

The registry is Debian's `docker-registry` (the CNCF Distribution registry), a host of its own on
the bridge (10.213.0.2:5000, tfcluster/nodes/hosts.py), plain HTTP, which each node's engine is told
to accept. The machine's engine is not told anything, so the image goes from it to the registry by
`skopeo copy docker-daemon:... docker://...`, which reads the image from the engine's socket; then
every node pulls it, as a swarm does when it starts a task, but before the run, so that the run
measures training rather than a pull. A push is skipped when the registry holds that very image
(the same config digest, which is the image's ID).

Host only, standard library only.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tfcluster.nodes.hosts import NETNS_ROOT, REGISTRY, Host, HostError, docker
from tfcluster.paths import ROOT

PORT = 5000
ADDRESS = f"{REGISTRY.address}:{PORT}"
# The registry's program, unpacked from Debian's package into the checkout rather than installed:
# the package would also enable a system service listening on every address's port 5000.
TOOLS = ROOT / ".tfcluster" / "tools"
REGISTRY_PROGRAM = TOOLS / "usr" / "bin" / "docker-registry"
APT_TIMEOUT = 600.0
CONFIG = """\
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: {address}
"""
READY_TIMEOUT = 30.0
PULL_TIMEOUT = 600.0
PUSH_TIMEOUT = 900.0


def tools_missing() -> list[str]:
    """What `up` must fetch first: the registry's program, skopeo."""
    return [
        name
        for name, there in (("docker-registry", REGISTRY_PROGRAM.is_file()), ("skopeo", shutil.which("skopeo")))
        if not there
    ]


def fetch_tools(missing: list[str]) -> None:
    """skopeo installed from Debian's packages, as scripts/setup installs its tools; the registry's
    program unpacked from its package into .tfcluster/tools (no service, nothing system-wide)."""
    apt(["update", "-qq"])
    if "skopeo" in missing:
        apt(["install", "-y", "-qq", "--no-install-recommends", "skopeo"])
    if "docker-registry" in missing:
        with tempfile.TemporaryDirectory() as folder:
            apt(["download", "docker-registry"], cwd=folder)
            (package,) = Path(folder).glob("docker-registry_*.deb")
            TOOLS.mkdir(parents=True, exist_ok=True)
            _step(["dpkg-deb", "--extract", str(package), str(TOOLS)], timeout=APT_TIMEOUT)


def apt(arguments: list[str], cwd: str | None = None) -> None:
    _step(
        ["apt-get", *arguments], timeout=APT_TIMEOUT, cwd=cwd, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    )


def _step(command: list[str], *, timeout: float, **options) -> subprocess.CompletedProcess:
    """A command that must succeed in time, else a HostError with its last line."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **options)
    except subprocess.TimeoutExpired:
        raise HostError(f"{' '.join(command[:3])} did not finish within {timeout:.0f}s") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise HostError(f"{' '.join(command[:3])} failed: {lines[-1] if lines else f'exit {done.returncode}'}")
    return done


def pid(host: Host = REGISTRY) -> int | None:
    try:
        number = int((host.run / "registry.pid").read_text())
        command = Path(f"/proc/{number}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return number if b"docker-registry" in command else None


def answers() -> bool:
    # No proxy: the registry is on the bridge, which no proxy of this machine's can reach.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{ADDRESS}/v2/", timeout=3):
            return True
    except OSError:
        return False


def start(host: Host = REGISTRY) -> float:
    """The registry, serving, in its host's namespace; returns the seconds it took (0 if it ran)."""
    if pid(host) is not None and answers():
        return 0.0
    host.run.mkdir(parents=True, exist_ok=True)
    (host.state / "storage").mkdir(parents=True, exist_ok=True)
    config = host.run / "config.yml"
    config.write_text(CONFIG.format(storage=host.state / "storage", address=ADDRESS))
    started = time.monotonic()
    with open(host.run / "registry.log", "ab") as log:
        process = subprocess.Popen(
            ["nsenter", f"--net={NETNS_ROOT / host.namespace}", str(REGISTRY_PROGRAM), "serve", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    (host.run / "registry.pid").write_text(f"{process.pid}\n")
    while not answers():
        if process.poll() is not None or time.monotonic() - started > READY_TIMEOUT:
            raise HostError(f"the registry did not start (log: {host.run / 'registry.log'})")
        time.sleep(0.1)
    return time.monotonic() - started


def reference(image: str) -> str:
    """Where the image is in the registry: `tfcluster:latest` is `10.213.0.2:5000/tfcluster:latest`."""
    name = image.rsplit("/", 1)[-1]
    return f"{ADDRESS}/{name if ':' in name else name + ':latest'}"


def local_id(image: str) -> str | None:
    shown = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True, text=True, timeout=60
    )
    return shown.stdout.strip() if shown.returncode == 0 else None


def registry_id(image: str) -> str | None:
    """The config digest of the registry's copy (what Docker calls the image's ID), if it has one."""
    shown = subprocess.run(
        ["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{reference(image)}"],
        capture_output=True,
        text=True,
    )
    if shown.returncode != 0:
        return None
    return json.loads(shown.stdout).get("config", {}).get("digest")


def push(image: str) -> tuple[bool, float]:
    """The machine's image into the registry unless it holds it; returns (pushed, seconds)."""
    started = time.monotonic()
    identity = local_id(image)
    if identity is None:
        raise HostError(f"no image {image} on this machine's engine (scripts/setup builds tfcluster:latest)")
    if registry_id(image) == identity:
        return False, time.monotonic() - started
    copied = subprocess.run(
        [
            "skopeo",
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
            f"docker-daemon:{image}",
            f"docker://{reference(image)}",
        ],
        capture_output=True,
        text=True,
    )
    if copied.returncode != 0:
        raise HostError(f"skopeo copy of {image} to the registry failed: {copied.stderr.strip().splitlines()[-1:]}")
    return True, time.monotonic() - started


def pull_everywhere(image: str, nodes: list[Host]) -> dict[str, float]:
    """Every node pulls the image from the registry at once; returns each one's seconds."""

    def pull(host: Host) -> float:
        started = time.monotonic()
        docker(host, "pull", "--quiet", reference(image), timeout=PULL_TIMEOUT, check=True)
        return time.monotonic() - started

    with ThreadPoolExecutor(max_workers=len(nodes) or 1) as pool:
        return dict(zip((host.name for host in nodes), pool.map(pull, nodes), strict=True))


def stop(host: Host = REGISTRY) -> None:
    number = pid(host)
    if number is not None:
        subprocess.run(["kill", str(number)], capture_output=True)

"""What a finished run's containers left, straight from the engine: each service's container
state and its log with the engine's timestamps. The docker CLI, not Compose: `docker ps`, one
`docker inspect` and the logs read at once take a tenth of a second, where each `docker compose`
call alone takes a quarter (the report's budget, docs/performance.md, is 0.3 s)."""

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

from tfcluster.report.evidence import engine_time

PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
# Seconds for any one call: the report runs in a cancelled run's clean-up too, which is bounded.
BOUND = 30


def containers(project: str) -> dict[str, dict]:
    """Each service's container in the Compose project, by service: its id, times, exit and limits."""
    return {
        entry["Config"]["Labels"].get(SERVICE_LABEL, entry["Name"].lstrip("/")): _described(entry)
        for entry in inspected(f"{PROJECT_LABEL}={project}")
    }


def inspected(label: str) -> list[dict]:
    """`docker inspect` of every container (running or not) with the label (`KEY` or `KEY=VALUE`),
    in one call; none if the engine cannot say."""
    listed = subprocess.run(
        ["docker", "ps", "--all", "--quiet", "--no-trunc", "--filter", f"label={label}"],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    ids = listed.stdout.split()
    if listed.returncode != 0 or not ids:
        return []
    inspection = subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True, timeout=BOUND)
    try:
        return json.loads(inspection.stdout or "[]")
    except ValueError:
        return []


# How each kind of a Compose project's things is listed ("running": its containers still running).
LISTINGS = {
    "container": ("ps", "--all"),
    "running": ("ps",),
    "network": ("network", "ls"),
    "volume": ("volume", "ls"),
}


def listed(kind: str, project: str) -> list[str] | None:
    """The ids of the Compose project's things of `kind` (LISTINGS); None if the engine cannot say."""
    command = ["docker", *LISTINGS[kind], "--quiet", "--filter", f"label={PROJECT_LABEL}={project}"]
    try:
        answer = subprocess.run(command, capture_output=True, text=True, timeout=BOUND)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return answer.stdout.split() if answer.returncode == 0 else None


def _described(entry: dict) -> dict:
    state, host = entry.get("State", {}), entry.get("HostConfig", {})
    return {
        "id": entry["Id"],
        "started": moment(state.get("StartedAt", "")),
        "finished": moment(state.get("FinishedAt", "")),
        "running": bool(state.get("Running")),
        "exit_code": state.get("ExitCode"),
        "oom_killed": bool(state.get("OOMKilled")),
        "restarts": entry.get("RestartCount", 0),
        "memory_limit": host.get("Memory") or None,
        "cpus": (host.get("NanoCpus") or 0) / 1e9 or None,
    }


def moment(stamp: str) -> float | None:
    """The engine's time, or None for its `0001-01-01T00:00:00Z`: not yet (or never) started or finished."""
    seconds = engine_time(stamp)
    return seconds if seconds is not None and seconds > 0 else None


def logs(found: dict[str, dict]) -> dict[str, str]:
    """Each container's whole log (stdout and stderr), each line after the engine's timestamp."""

    def read(container: dict) -> str:
        got = subprocess.run(
            ["docker", "logs", "--timestamps", container["id"]], capture_output=True, text=True, timeout=BOUND
        )
        # Both streams: the engine has kept their lines' times, and their order is by time.
        return "\n".join(sorted((got.stdout + got.stderr).splitlines()))

    with ThreadPoolExecutor(max_workers=max(1, len(found))) as pool:
        return dict(zip(found, pool.map(read, found.values()), strict=True))

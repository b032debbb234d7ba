"""Bind mounts from inside a container: the engine resolves a mount's source on its own host.

A CI runner's `container:` job (or GitLab's Docker executor) drives the host's engine through its
socket, so the containers a run starts are the job container's siblings, and a path this script
names (your project, its data, a training script, this checkout's trainer/ with --dev) is looked
up on the host, not here. Where the checkout is mounted at the same path it is the same folder;
elsewhere the engine would mount another folder, or make an empty one, and the workers would fail
far from the cause. So, only when this runs in a container, each source is tried first with a
throwaway container that checks it sees the same entry there. Host only, standard library only.
"""

import socket
import subprocess
from pathlib import Path

# Docker makes this file in every container; Podman makes the second.
CONTAINER_MARKERS = (Path("/.dockerenv"), Path("/run/.containerenv"))


def in_container(environment: dict[str, str]) -> bool:
    """Whether this runs in a container other than the engine's host: a container's marker file,
    and an engine whose host name is not this one's (a machine that is itself a container, as
    some CI machines are, has the marker too, and its engine beside it sees its paths)."""
    if not any(marker.exists() for marker in CONTAINER_MARKERS):
        return False
    engine = subprocess.run(
        ["docker", "info", "--format", "{{.Name}}"], env=environment, capture_output=True, text=True
    ).stdout.strip()
    return engine != socket.gethostname()


def unseen(sources: dict[str, str], image: str, environment: dict[str, str]) -> list[str]:
    """The sources (by what they are, e.g. "--project") that the engine does not see as they are here.

    Each source is a file or folder; a folder is the same if the engine sees one of its entries.
    """
    missing = []
    for what, source in sources.items():
        path = Path(source)
        probe = "/probe"
        if path.is_dir():  # The same folder if the engine sees its first entry there too.
            entry = next(path.iterdir(), None)
            probe = f"/probe/{entry.name}" if entry else probe
        # --mount, not -v: a source missing on the host is an error, not an empty folder made there.
        check = [
            "docker", "run", "--rm", "--network", "none", "--entrypoint", "test",
            "--mount", f"type=bind,{csv_field(f'source={path}')},target=/probe,readonly",
            image, "-e", probe,
        ]  # fmt: skip
        seen = subprocess.run(check, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if seen.returncode != 0:
            missing.append(what)
    return missing


def csv_field(field: str) -> str:
    """One field of --mount's value, which Docker reads as CSV: quoted if a comma or quote is in it."""
    if "," not in field and '"' not in field:
        return field
    return '"' + field.replace('"', '""') + '"'


def refusal(what: str, source: str) -> str:
    """The one line for a source the engine does not see."""
    instead = ", or use --bake, which sends the project to the engine instead" if what == "--project" else ""
    return (
        f"{what} {source}: the Docker engine does not see it at that path: this runs in a container that "
        "drives the host's engine, which looks a bind mount's source up on the host; mount the checkout at "
        f'the same path in the job container{instead} (docs/ci.md, "The container job")'
    )

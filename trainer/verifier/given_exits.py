"""Exit codes given for saved logs (`--exit-codes`, `--exit-codes-from`): read, checked, matched to the logs.

A saved log holds no exit status, yet the pass rule says every worker exited 0; CI knows each
container's code, so it can say. Two forms, both easy to write:

  --exit-codes worker-0=0,worker-1=1
  --exit-codes-from FILE      # `NAME CODE` lines, as these commands print them:
      docker compose ps --all --format '{{.Service}} {{.ExitCode}}' worker-0 worker-1
      docker inspect --format '{{.Name}} {{.State.ExitCode}}' CONTAINER...

A name is a log's (its file's stem), or a Compose container's (`/PROJECT-worker-0-1`, as
`docker inspect` gives it), matched to the one log whose name it ends with. A name that matches no
log, a code that is no integer in [0, 255] or a worker given two codes is a ValueError: one line
naming it (a config error, exit 2). So are two logs of one worker (the same name, or the same
bytes under two names: a copy proves nothing of a second worker), which would agree by themselves.

A log given no code fails the verdict, as a live worker with no exit status does, unless the
caller asks otherwise (`--allow-unknown-exits`, for a log whose program has no exit code to give).
"""

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

_HIGHEST = 255  # What an exit status can be.


def from_option(text: str) -> list[tuple[str, str]]:
    """`worker-0=0,worker-1=1` as (name, code text) pairs."""
    pairs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, equals, code = item.partition("=")
        if not equals or not name.strip():
            raise ValueError(f"--exit-codes: {item!r} is not NAME=CODE (e.g. worker-1=0)")
        pairs.append((name.strip(), code.strip()))
    return pairs


def from_file(text: str, source: str) -> list[tuple[str, str]]:
    """`NAME CODE` lines as (name, code text) pairs; blank lines and `#` comments are skipped."""
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) != 2:
            raise ValueError(f"{source}, line {number}: {line.strip()!r} is not `NAME CODE` (e.g. worker-1 0)")
        pairs.append((words[0], words[1]))
    return pairs


def match(pairs: Iterable[tuple[str, str]], logs: list[str]) -> dict[str, int]:
    """Each log's given exit code, by log name; logs not given one are left out (their exit is unknown)."""
    codes: dict[str, int] = {}
    for name, text in pairs:
        log = _log_of(name, logs)
        code = _code(name, text)
        if codes.get(log, code) != code:
            raise ValueError(f"exit codes: {log} is given two exit codes, {codes[log]} and {code}")
        codes[log] = code
    return codes


def check_distinct(paths: list[Path]) -> None:
    """Refuses two logs of one worker: the same name twice, or the same bytes twice; a ValueError."""
    by_name: dict[str, Path] = {}
    by_content: dict[str, Path] = {}
    for path in paths:
        if path.stem in by_name:
            raise ValueError(f"two logs for {path.stem}: {by_name[path.stem]} and {path} (one log per worker)")
        by_name[path.stem] = path
        content = path.read_bytes()
        if not content.strip():
            continue  # Empty logs are alike without being one: each is judged, as a worker that said nothing.
        digest = hashlib.sha256(content).hexdigest()
        if digest in by_content:
            raise ValueError(
                f"{by_content[digest]} and {path} are the same log, byte for byte: each worker's own log is needed"
            )
        by_content[digest] = path


def lost(items: list[str], logs: list[str]) -> dict[str, str]:
    """`--lost NAME=WHY` as {name: why}; a lost worker has no log, so its name must be no log's."""
    found: dict[str, str] = {}
    for item in items:
        name, equals, why = (part.strip() for part in item.partition("="))
        if not equals or not name or not why:
            raise ValueError(f"--lost: {item!r} is not NAME=WHY (e.g. worker-2=its host went down)")
        if name in logs or name in found:
            raise ValueError(
                f"--lost: {name} is given twice (as lost, and {'as a log' if name in logs else 'lost again'})"
            )
        found[name] = why
    return found


def _log_of(name: str, logs: list[str]) -> str:
    bare = name.lstrip("/")
    if bare in logs:
        return bare
    # Compose names a service's container PROJECT-SERVICE-N.
    matching = [log for log in logs if re.fullmatch(rf"(?:.+-)?{re.escape(log)}-\d+", bare)]
    if len(matching) == 1:
        return matching[0]
    if matching:
        raise ValueError(f"exit codes: {name!r} matches more than one log: {', '.join(matching)}")
    raise ValueError(f"exit codes: {name!r} matches no log (the logs: {', '.join(logs)})")


def _code(name: str, text: str) -> int:
    try:
        code = int(text)
    except ValueError:
        code = -1
    if not 0 <= code <= _HIGHEST:
        raise ValueError(f"exit codes: the exit code of {name} ({text!r}) must be an integer in [0, {_HIGHEST}]")
    return code

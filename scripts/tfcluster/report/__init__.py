"""The run's report: one self-contained HTML page (report.html) with the verdict, every worker's
metrics by epoch, the points where their model states were compared and where they first
differed, a timeline per worker (its container, start-up, rendezvous, training, epochs,
checkpoints, restarts, network faults, its exit), each worker's time and resources, and the proofs.

A run keeps what its report is made of in its folder (`record/`: each container's state, and each
container's log with the engine's timestamps, the verifier's with its verdict record), so that
`scripts/report FOLDER` makes the page again, on any machine, from the files alone.
"""

import json
import re
import time
from pathlib import Path

from tfcluster.report import engine, evidence, page
from trainer.contract import verdict as records

RECORD = "record"
PAGE = "report.html"
CONTAINERS = "containers.json"
RUN = "run.json"
VERIFIER = "verifier"
_WORKER = re.compile(r"^(chief|worker-\d+)$")


def keep(folder: Path, project: str) -> None:
    """Saves what the Compose project's containers left into `folder`/record/ (replacing an earlier run's)."""
    found = engine.containers(project)
    keep_logs(folder, project, engine.logs(found), found)


def keep_logs(folder: Path, project: str, logs: dict[str, str], found: dict[str, dict]) -> None:
    """Saves each service's timed log and container state into `folder`/record/."""
    saved = folder / RECORD
    saved.mkdir(parents=True, exist_ok=True)
    for old in saved.glob("*.log"):
        old.unlink()
    for service, text in logs.items():
        (saved / f"{service}.log").write_text(text, encoding="utf-8")
    (saved / CONTAINERS).write_text(json.dumps(found, indent=1), encoding="utf-8")
    (saved / RUN).write_text(json.dumps({"project": project}), encoding="utf-8")


def write(folder: Path, out: Path | None = None) -> Path:
    """The page made from `folder`/record/, written to `out` (default `folder`/report.html)."""
    target = out or folder / PAGE
    text = page.render(data(folder))
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(target)
    return target


def data(folder: Path) -> dict:
    """Everything the page shows, as JSON-able data, from `folder`/record/."""
    saved = folder / RECORD
    if not saved.is_dir():
        raise FileNotFoundError(f"{saved}: no saved record of a run here (a run keeps one in its folder)")
    containers = _json(saved / CONTAINERS) or {}
    logs = {path.stem: path.read_text(encoding="utf-8", errors="replace") for path in sorted(saved.glob("*.log"))}
    lines = [text for _, text in evidence.timed_lines(logs.pop(VERIFIER, ""))]
    record = records.found_in(lines)
    names = [w["name"] for w in (record or {}).get("workers", []) if w.get("name") in logs]
    names += sorted((name for name in logs if _WORKER.match(name) and name not in names), key=_order)
    workers = [evidence.worker(name, logs[name], containers.get(name)) for name in names]
    for worker in workers:
        ended = worker["container"].get("finished")
        if ended and not worker["container"].get("running"):
            code = worker["container"].get("exit_code")
            worker["marks"].append({"t": ended, "kind": "exit", "label": f"container exited {code}"})
    times = [t for w in workers for t in _times(w)]
    return {
        "project": (_json(saved / RUN) or {}).get("project", folder.name),
        "written": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "folder": str(folder),
        "verdict": record,
        "summary": next((line for line in reversed(lines) if line.startswith("verdict: ")), None),
        "verifier": [line for line in lines if not line.startswith('{"event": "verdict"')],
        "workers": workers,
        "origin": min(times, default=0.0),
        "end": max(times, default=0.0),
    }


def _times(worker: dict) -> list[float]:
    container = worker["container"]
    found = [container.get("started"), container.get("finished") if not container.get("running") else None]
    found += [phase["from"] for phase in worker["phases"]] + [phase["to"] for phase in worker["phases"]]
    found += [mark["t"] for mark in worker["marks"]]
    return [t for t in found if isinstance(t, (int, float)) and t > 0]


def _order(name: str) -> tuple[int, int]:
    return (0, 0) if name == "chief" else (1, int(name.rsplit("-", 1)[1]))


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None

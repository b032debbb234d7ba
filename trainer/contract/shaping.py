"""The launcher's side of network shaping (compose.network.yaml): wait for the shaper's measurements.

A worker's shaper (trainer/shaper/__main__.py) writes `network-<worker>.json` to the results directory
once its profile is applied and every link measured. Training before that would run on a network
other than the one asked for, and a profile the measurements miss would make the run a lie; so
the launcher waits for the file, within the join deadline, and stops if the shaping is not real.
"""

import json
from pathlib import Path

# The network profiles by name, in the order the docs give them: the one list that scripts/run
# --network, the benchmark and the shaper (trainer/shaper/profiles.py, which defines each) share.
PROFILE_NAMES = ("lan", "wan", "lossy", "thin")


def report_path(results_dir: str, host: str) -> Path:
    return Path(results_dir) / f"network-{host}.json"


def read_report(results_dir: str, host: str, run_id: str | None = None) -> dict | None:
    """The shaper's report (for the launcher whose run is `run_id`, if given), once it is there.

    It is written whole, by a rename. One written for an earlier launcher of the same worker (a
    restarted container) is not this run's: its shaper was in another network namespace.
    """
    try:
        report = json.loads(report_path(results_dir, host).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return report if run_id is None or report.get("run") == run_id else None


def summary(report: dict) -> str:
    links = "; ".join(
        f"{link['peer']} rtt {link['rtt_ms']:.2f} ms"
        + (f" ({link['profile']})" if link.get("profile") else "")
        + (f", {link['throughput_mbit']:.1f} Mbit/s" if link.get("throughput_mbit") is not None else "")
        + (f", loss {link['loss']:.2%}" if link.get("loss") is not None else "")
        for link in report.get("links", [])
    )
    return f"network {report.get('describe', report.get('profile'))}: measured {links or 'no link'}"

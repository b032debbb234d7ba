"""The launcher's side of network shaping (compose.network.yaml): wait for the shaper's measurements.

A worker's shaper (trainer/shaper/__main__.py) writes `network-<worker>.json` to the results directory
once its profile is applied and every link measured. Training before that would run on a network
other than the one asked for, and a profile the measurements miss would make the run a lie; so
the launcher waits for the file, within the join deadline, and stops if the shaping is not real.

The profiles themselves are here too, one definition for the shaper and the host: what the links
between workers should look like, by name; the shaper's settings adjust one field by field.
"""

import dataclasses
import json
from pathlib import Path


@dataclasses.dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    rtt_ms: float = 0.0  # Round trip time added between two workers.
    jitter_ms: float = 0.0  # Up to this much more or less, per direction, in order.
    loss: float = 0.0  # Fraction of packets each worker drops as they arrive.
    rate_mbit: float = 0.0  # Cap on what each worker sends, in Mbit/s; 0: none.

    def __post_init__(self):
        # Each field's own range is a setting's (trainer/shaper/settings.py); this one spans two fields.
        if self.jitter_ms > self.rtt_ms / 2:
            raise ValueError(
                f"`TF_NETWORK_JITTER_MS` ({self.jitter_ms:g}) must be at most half of `TF_NETWORK_RTT_MS` "
                f"({self.rtt_ms:g}): the jitter is added to each direction's half"
            )

    @property
    def delays(self) -> bool:
        return self.rtt_ms > 0

    def describe(self) -> str:
        parts = []
        if self.rtt_ms:
            parts.append(f"rtt +{self.rtt_ms:g} ms" + (f" ±{self.jitter_ms:g} ms" if self.jitter_ms else ""))
        if self.loss:
            parts.append(f"loss {self.loss:.1%}")
        if self.rate_mbit:
            parts.append(f"rate {self.rate_mbit:g} Mbit/s")
        return f"{self.name} ({', '.join(parts) or 'no shaping'})"


PROFILES = {
    "lan": Profile(name="lan"),
    "wan": Profile(name="wan", rtt_ms=50, jitter_ms=5),
    "lossy": Profile(name="lossy", loss=0.01),
    "thin": Profile(name="thin", rate_mbit=100),
}


# The profiles' names, in the order the docs give them: scripts/run --network's choices, and the
# benchmark's cases. The shaper applies them; scripts/run checks what links that differ ask of
# them (a rate per link) before anything starts.
PROFILE_NAMES = tuple(PROFILES)


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

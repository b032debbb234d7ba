"""Network profiles: what the links between workers should look like, by name or field by field."""

import dataclasses
import math
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    rtt_ms: float = 0.0  # Round trip time added between two workers.
    jitter_ms: float = 0.0  # Up to this much more or less, per direction, in order.
    loss: float = 0.0  # Fraction of packets each worker drops as they arrive.
    rate_mbit: float = 0.0  # Cap on what each worker sends, in Mbit/s; 0: none.

    def __post_init__(self):
        for field, low, high in (
            ("rtt_ms", 0, 10_000),
            ("jitter_ms", 0, 10_000),
            ("loss", 0, 0.5),
            ("rate_mbit", 0, 100_000),
        ):
            value = getattr(self, field)
            if not (math.isfinite(value) and low <= value <= high):
                raise ValueError(f"`{ENV_NAMES[field]}` ({value:g}) must be in [{low:g}, {high:g}]")
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

ENV_NAMES = {
    "rtt_ms": "TF_NETWORK_RTT_MS",
    "jitter_ms": "TF_NETWORK_JITTER_MS",
    "loss": "TF_NETWORK_LOSS",
    "rate_mbit": "TF_NETWORK_RATE_MBIT",
}


def from_env(environ: Mapping[str, str]) -> Profile:
    """TF_NETWORK_PROFILE names the base profile (default lan); each TF_NETWORK_* field overrides it."""
    name = environ.get("TF_NETWORK_PROFILE", "").strip() or "lan"
    if name not in PROFILES:
        raise ValueError(f"`TF_NETWORK_PROFILE` ({name!r}) must be one of {', '.join(PROFILES)}")
    values = dataclasses.asdict(PROFILES[name])
    changed = False
    for field, variable in ENV_NAMES.items():
        text = environ.get(variable, "").strip()
        if not text:
            continue
        try:
            values[field] = float(text.rstrip("%")) / 100 if field == "loss" and text.endswith("%") else float(text)
        except ValueError:
            raise ValueError(f"`{variable}` ({text!r}) must be a number") from None
        changed = True
    if changed:
        values["name"] = f"{name}+custom"
    return Profile(**values)

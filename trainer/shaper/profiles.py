"""Network profiles: what the links between workers should look like, by name or field by field.

The environment picks and adjusts one through the shaper's settings (trainer/shaper/settings.py).
"""

import dataclasses


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

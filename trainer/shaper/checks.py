"""Is the shaping real? Each measured figure against its profile, with the margin it must keep."""

import dataclasses
import math

from trainer.contract.shaping import Profile
from trainer.shaper.probe import DATAGRAMS, Link

# Measured round trip time and throughput must be within this fraction of the profile's.
MARGIN = 0.20
# Loss is a count of independent drops: within four standard deviations of the binomial. Three
# (0.27 % of runs outside by chance, per link) failed about one CI run in twenty-five, at 1.44 %
# against 1.42 %; four still tells a missing rule (0 %) or a doubled one (2 %) from 1 %.
LOSS_SIGMAS = 4


@dataclasses.dataclass(frozen=True)
class Check:
    what: str
    measured: float
    low: float
    high: float
    unit: str

    @property
    def ok(self) -> bool:
        return self.low <= self.measured <= self.high

    def describe(self) -> str:
        verdict = "ok" if self.ok else "OUTSIDE"
        return (
            f"{self.what} {_show(self.measured, self.unit)} "
            f"(expected {_show(self.low, self.unit)} to {_show(self.high, self.unit)}: {verdict})"
        )


def _show(value: float, unit: str) -> str:
    return f"{value:.2%}" if unit == "%" else f"{value:.1f} {unit}"


def checks(profile: Profile, link: Link, base_rtt_ms: float = 0.0) -> list[Check]:
    found = []
    if profile.rtt_ms:
        expected = profile.rtt_ms + base_rtt_ms
        found.append(Check(f"rtt to {link.peer}", link.rtt_ms, expected * (1 - MARGIN), expected * (1 + MARGIN), "ms"))
    if profile.rate_mbit and link.throughput_mbit is not None:
        rate = profile.rate_mbit
        found.append(
            Check(
                f"throughput to {link.peer}", link.throughput_mbit, rate * (1 - MARGIN), rate * (1 + MARGIN), "Mbit/s"
            )
        )
    if profile.loss and link.loss is not None:
        spread = LOSS_SIGMAS * math.sqrt(profile.loss * (1 - profile.loss) / DATAGRAMS)
        found.append(
            Check(f"loss to {link.peer}", link.loss, max(0.0, profile.loss - spread), profile.loss + spread, "%")
        )
    return found

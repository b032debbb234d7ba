"""The shaper's settings: which worker, where its results go, the network profile it applies, its faults.

TF_NETWORK_PROFILE names the base profile (default lan, trainer/contract/shaping.py); each
TF_NETWORK_* field set overrides the base's, and the profile is then called `NAME+custom`.
"""

import dataclasses

from trainer.contract.faults import VARIABLE as FAULTS
from trainer.contract.faults import Fault
from trainer.contract.faults import parse as parse_faults
from trainer.contract.links import VARIABLE as LINKS
from trainer.contract.links import Links
from trainer.contract.links import parse as parse_links
from trainer.contract.settings import Settings, setting
from trainer.contract.shaping import PROFILES, Profile


def fraction(text: str) -> float:
    """A fraction, or a percentage with its sign: `0.01` and `1%` are the same loss."""
    return float(text.rstrip("%")) / 100 if text.endswith("%") else float(text)


def _override(env: str, *, at_most: float, kind=float):
    """One field of the base profile, set on its own; None (unset) keeps the base's.

    Its value is shown as `%g` in messages, as the jitter check and `Profile.describe` show it.
    """
    return setting(env=env, kind=kind, at_least=0, at_most=at_most, value_format="g", default=None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShaperSettings(Settings):
    """Everything the shaper reads from its environment, read once by its entry point (trainer/shaper/__main__.py)."""

    # Required to shape (`partition` and `heal` only name it): the shaper cannot tell its worker on its own.
    worker: str = setting(env="SHAPED_WORKER", default="")
    results_dir: str = setting(env="TF_RESULTS_DIR", default="/results")
    profile_name: str = setting(env="TF_NETWORK_PROFILE", choices=PROFILES, default="lan")
    rtt_ms: float | None = _override("TF_NETWORK_RTT_MS", at_most=10_000)
    jitter_ms: float | None = _override("TF_NETWORK_JITTER_MS", at_most=10_000)
    loss: float | None = _override("TF_NETWORK_LOSS", at_most=0.5, kind=fraction)
    rate_mbit: float | None = _override("TF_NETWORK_RATE_MBIT", at_most=100_000)
    # Faults timed by training progress (trainer/contract/faults.py), of any worker: each shaper applies
    # those its worker is an end of. Parsed here too, so a bad clause is refused before the cluster is known.
    faults_text: str = setting(env=FAULTS, default="")
    # Links that differ from the profile (trainer/contract/links.py): racks, a distant worker, one way.
    links_text: str = setting(env=LINKS, default="")
    # The base profile with the overrides: derived, so made (and its jitter checked) with the settings.
    profile: Profile = dataclasses.field(init=False, repr=False, compare=False)
    faults: tuple[Fault, ...] = dataclasses.field(init=False, repr=False, compare=False)
    links: Links = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        super().__post_init__()
        overrides = {
            name: value
            for name in ("rtt_ms", "jitter_ms", "loss", "rate_mbit")
            if (value := getattr(self, name)) is not None
        }
        base = PROFILES[self.profile_name]
        name = f"{base.name}+custom" if overrides else base.name
        # Frozen: a derived field is set the way dataclasses set fields themselves.
        object.__setattr__(self, "profile", dataclasses.replace(base, name=name, **overrides))
        object.__setattr__(self, "faults", tuple(parse_faults(self.faults_text)))
        object.__setattr__(self, "links", parse_links(self.links_text, PROFILES))

    def profile_between(self, sender: str, receiver: str) -> Profile:
        """The profile of what `sender` sends `receiver`: the run's (with its overrides), or a link's."""
        name = self.links.profile_of(sender, receiver, self.profile_name)
        return self.profile if name == self.profile_name else PROFILES[name]

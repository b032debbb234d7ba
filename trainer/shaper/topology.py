"""Each link of one worker as its shaper shapes and checks it: the run's profile, or a link's.

Links that differ (TF_NETWORK_LINKS, trainer/contract/links.py) give each direction between two
workers its own profile. The shaper of the worker that receives shapes that direction: it holds
what arrives from each peer for half of that direction's round trip (the relay knows the
connection's client), and drops it at that direction's loss rate. A round trip crosses both
directions, so a probe to a peer expects the mean of the two; loss and rate are what this worker
sends.
"""

import dataclasses

from trainer.contract.shaping import Profile


@dataclasses.dataclass(frozen=True)
class PeerLink:
    peer: str
    inbound: Profile  # What the peer sends this worker.
    outbound: Profile  # What this worker sends the peer.

    @property
    def expected(self) -> Profile:
        """What this worker's probe of the peer should measure."""
        if self.inbound == self.outbound:
            return self.outbound
        name = (
            self.outbound.name
            if self.outbound.name == self.inbound.name
            else (f"{self.outbound.name} out, {self.inbound.name} in")
        )
        return Profile(
            name=name,
            rtt_ms=(self.inbound.rtt_ms + self.outbound.rtt_ms) / 2,
            jitter_ms=(self.inbound.jitter_ms + self.outbound.jitter_ms) / 2,
            loss=self.outbound.loss,
            rate_mbit=self.outbound.rate_mbit,
        )


def links_of(settings, me: str, others: list[str]) -> list[PeerLink]:
    """Every link of `me`, from the shaper's settings (ShaperSettings.profile_between)."""
    return [PeerLink(peer, settings.profile_between(peer, me), settings.profile_between(me, peer)) for peer in others]


def uniform(links: list[PeerLink], profile: Profile) -> bool:
    """Whether every link is the run's profile both ways: then the whole interface is shaped alike."""
    return all(link.inbound == profile and link.outbound == profile for link in links)

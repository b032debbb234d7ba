"""Each peer's link shaped by its own profiles, and changed mid-run by a link's fault.

Where links differ (TF_NETWORK_LINKS) or a fault changes some of them (`LINK: PROFILE at step N
for Ds`, trainer/contract/faults.py), the shaper shapes each peer apart: what arrives from it
(the relay's delay for the connection's client, loss by its source address) and what this worker
sends it (the relay's delay on the peer's connections, and its own rate class, htb, filtered by
destination). Every part can change while the worker trains, from its next chunk or packet on: a
fault sets the profiles it names, and puts the links' own back when it ends. What a fault will
need (the relay, a rate class per peer) is in place from the start, at the links' own profiles.
"""

import socket

from trainer.contract.faults import Fault
from trainer.contract.shaping import PROFILES, Profile
from trainer.shaper import probe, relay, rules
from trainer.shaper.topology import PeerLink

# Where the relay listens for the redirected connections: TensorFlow's and the probe's.
RELAY_OFFSET = 10


class Peers:
    def __init__(self, me: str, links: list[PeerLink], faults: list[Fault] = ()):
        self._me = me
        self._links = {link.peer: link for link in links}
        self._addresses = {peer: socket.gethostbyname(peer) for peer in self._links}
        # (what the peer sends this worker, what this worker sends it): the relay calls each per chunk.
        self._delays = {peer: (relay.Delay(0, 0), relay.Delay(0, 0)) for peer in self._links}
        self._losses = dict.fromkeys(self._links, 0.0)
        self._classes: dict[str, str] = {}
        # What each link's fault makes of this worker's links, worked out once.
        self._changes = {fault: self._profiles(fault) for fault in faults if fault.kind == "link"}

    def _profiles(self, fault: Fault) -> dict[str, tuple[Profile, Profile]]:
        """What `fault` makes of this worker's links, by peer (only those it names)."""
        named, changed = fault.links(), {}
        for peer, link in self._links.items():
            inbound = named.profile_of(peer, self._me, "")
            outbound = named.profile_of(self._me, peer, "")
            if inbound or outbound:
                changed[peer] = (
                    PROFILES[inbound] if inbound else link.inbound,
                    PROFILES[outbound] if outbound else link.outbound,
                )
        return changed

    async def start(self, tf_port: int) -> None:
        """The links' own profiles, with room for every change the faults will make."""
        every = [*((link.inbound, link.outbound) for link in self._links.values())]
        every += [pair for change in self._changes.values() for pair in change.values()]
        rates = {outbound.rate_mbit for _, outbound in every}
        if len(rates) > 1:
            addresses = rules.rate_classes(list(self._addresses.values()))
            self._classes = {peer: addresses[address] for peer, address in self._addresses.items()}
        elif rates != {0}:
            rules.limit_rate(rates.pop())  # One rate for every link, all along: one bucket.
        for link in self._links.values():
            self._set(link.peer, link.inbound, link.outbound)
        if any(profile.delays for pair in every for profile in pair):
            by_address = {self._addresses[peer]: delays for peer, delays in self._delays.items()}
            unknown = (relay.Delay(0, 0), relay.Delay(0, 0))  # Not a peer: not shaped.
            for port in (tf_port, probe.PROBE_PORT):
                await relay.serve(port + RELAY_OFFSET, port, lambda address: by_address.get(address, unknown))
                rules.redirect(port, port + RELAY_OFFSET)

    def change(self, fault: Fault) -> None:
        """The profiles `fault` gives the links it names."""
        for peer, (inbound, outbound) in self._changes[fault].items():
            self._set(peer, inbound, outbound)

    def restore(self, fault: Fault) -> None:
        """The links `fault` named, back to their own profiles."""
        for peer in self._changes[fault]:
            link = self._links[peer]
            self._set(peer, link.inbound, link.outbound)

    def _set(self, peer: str, inbound: Profile, outbound: Profile) -> None:
        arriving, leaving = self._delays[peer]
        arriving.set(inbound.rtt_ms / 2, inbound.jitter_ms)
        leaving.set(outbound.rtt_ms / 2, outbound.jitter_ms)
        if inbound.loss != self._losses[peer]:
            rules.set_loss(inbound.loss, self._addresses[peer])
            self._losses[peer] = inbound.loss
        if peer in self._classes:
            rules.set_class_rate(self._classes[peer], outbound.rate_mbit)

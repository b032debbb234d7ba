"""Each peer's link shaped apart, and changed mid-run by a link's fault (trainer/shaper/peers.py)."""

import asyncio

import pytest

from trainer.contract import faults
from trainer.contract.shaping import PROFILES
from trainer.shaper import peers, relay, rules
from trainer.shaper.topology import PeerLink

ADDRESSES = {"worker-1": "10.9.0.2", "worker-2": "10.9.0.3", "worker-3": "10.9.0.4"}
LAN, WAN, THIN, LOSSY = (PROFILES[name] for name in ("lan", "wan", "thin", "lossy"))


@pytest.fixture
def kernel(monkeypatch):
    """What the shaper asks of the kernel and the relay, recorded instead of done."""
    done = []
    monkeypatch.setattr(peers.socket, "gethostbyname", ADDRESSES.__getitem__)
    monkeypatch.setattr(rules, "limit_rate", lambda mbit: done.append(("tbf", mbit)))
    monkeypatch.setattr(
        rules,
        "rate_classes",
        lambda addresses: done.append(("htb", sorted(addresses))) or {a: f"1:{a}" for a in addresses},
    )
    monkeypatch.setattr(rules, "set_class_rate", lambda classid, mbit: done.append(("class", classid, mbit)))
    monkeypatch.setattr(rules, "set_loss", lambda probability, source: done.append(("loss", source, probability)))
    monkeypatch.setattr(rules, "redirect", lambda port, to: done.append(("redirect", port)))
    routes = {}

    async def serve(listen, target, route):
        routes[target] = route

    monkeypatch.setattr(relay, "serve", serve)
    return done, routes


def racks(profile=LAN) -> list[PeerLink]:
    """worker-0's links in a cluster of four, all at `profile`."""
    return [PeerLink(peer, profile, profile) for peer in ADDRESSES]


def one_way_ms(route, address: str) -> tuple[float, float]:
    arriving, leaving = route(address)
    return arriving.one_way_ms, leaving.one_way_ms


def test_links_that_differ_in_rate_get_a_class_each_at_its_own_rate(kernel):
    done, routes = kernel
    links = [PeerLink("worker-1", LAN, LAN), PeerLink("worker-2", THIN, THIN), PeerLink("worker-3", LAN, THIN)]
    asyncio.run(peers.Peers("worker-0", links).start(12345))
    assert done[0] == ("htb", sorted(ADDRESSES.values()))
    assert ("class", "1:10.9.0.2", 0) in done  # lan: no cap
    assert ("class", "1:10.9.0.3", 100) in done and ("class", "1:10.9.0.4", 100) in done
    assert not any(step[0] == "tbf" for step in done) and routes == {}  # No delay anywhere: no relay.


def test_one_rate_for_every_link_is_one_bucket(kernel):
    done, _ = kernel
    asyncio.run(peers.Peers("worker-0", racks(THIN)).start(12345))
    assert ("tbf", 100) in done and not any(step[0] in ("htb", "class") for step in done)


def test_a_link_fault_changes_the_links_it_names_and_restores_them(kernel):
    done, routes = kernel
    [fault] = faults.parse("worker-0,worker-1 <-> worker-2,worker-3: wan at step 3 for 5s")
    shaped = peers.Peers("worker-0", racks(), [fault])
    asyncio.run(shaped.start(12345))
    # The relay is in from the start, at the links' own delays (none), for the fault to change.
    route = routes[12345]
    assert {address: one_way_ms(route, address) for address in ADDRESSES.values()} == dict.fromkeys(
        ADDRESSES.values(), (0, 0)
    )
    shaped.change(fault)
    assert one_way_ms(route, "10.9.0.2") == (0, 0)  # worker-1: the same rack
    assert one_way_ms(route, "10.9.0.3") == (25, 25) and one_way_ms(route, "10.9.0.4") == (25, 25)
    shaped.restore(fault)
    assert {address: one_way_ms(route, address) for address in ADDRESSES.values()} == dict.fromkeys(
        ADDRESSES.values(), (0, 0)
    )


def test_a_link_fault_of_rate_and_loss_sets_them_one_way_and_back(kernel):
    done, _ = kernel
    thin, lossy = faults.parse(
        "worker-0 -> worker-2: thin at step 3 for 5s; worker-3 -> worker-0: lossy at step 4 for 2s"
    )
    shaped = peers.Peers("worker-0", racks(), [thin, lossy])
    asyncio.run(shaped.start(12345))
    assert done[0] == ("htb", sorted(ADDRESSES.values()))  # A rate will differ by link: a class each.
    done.clear()
    shaped.change(thin)
    # What worker-0 sends worker-2 only; nothing arrives at a new loss.
    assert done == [("class", "1:10.9.0.3", 100)]
    shaped.restore(thin)
    assert done[1:] == [("class", "1:10.9.0.3", 0)]
    done.clear()
    shaped.change(lossy)
    # What worker-3 sends worker-0 is dropped here (its own rate unchanged: worker-0 -> worker-3 stays lan).
    assert ("loss", "10.9.0.4", 0.01) in done
    shaped.restore(lossy)
    assert done[-2:] == [("loss", "10.9.0.4", 0.0), ("class", "1:10.9.0.4", 0)]


def test_a_fault_names_the_shapers_at_both_ends_of_each_direction():
    workers = ["worker-0", "worker-1", "worker-2", "worker-3"]
    [racks_fault, one_way, cut] = faults.parse(
        "worker-0,worker-1 <-> worker-2,worker-3: thin at step 5 for 30s; worker-3 -> worker-1: lossy at 2s for 1s;"
        " cut worker-2 in at epoch 2 for 3s",
        workers,
    )
    assert racks_fault.ends(workers) == workers and racks_fault.kind == "link"
    assert one_way.ends(workers) == ["worker-1", "worker-3"]
    assert cut.ends(workers) == ["worker-2"] and cut.kind == "cut"
    assert racks_fault.describe() == "worker-0,worker-1 <-> worker-2,worker-3: thin at step 5 for 30s"
    assert one_way.describe() == "worker-3 -> worker-1: lossy at 2s after its first step for 1s"

"""Links that differ (trainer/contract/links.py): the clauses, and the profile of each direction."""

import pytest

from trainer.contract.links import parse
from trainer.contract.shaping import PROFILE_NAMES

WORKERS = [f"worker-{index}" for index in range(4)]


def matrix(text: str, default: str = "lan") -> dict[tuple[str, str], str]:
    links = parse(text, PROFILE_NAMES, WORKERS)
    return {(a, b): links.profile_of(a, b, default) for a in WORKERS for b in WORKERS if a != b}


def test_two_racks_are_the_profile_inside_and_the_link_between():
    found = matrix("worker-0,worker-1 <-> worker-2,worker-3: wan")
    assert {pair for pair, profile in found.items() if profile == "wan"} == {
        (a, b) for a in WORKERS for b in WORKERS if (a in WORKERS[:2]) != (b in WORKERS[:2])
    }
    assert found[("worker-0", "worker-1")] == found[("worker-3", "worker-2")] == "lan"


def test_a_distant_worker_one_way_and_the_last_clause_winning():
    found = matrix("worker-3 <-> *: wan; worker-0 -> worker-1: lossy; worker-3 -> worker-0: thin")
    assert [found[("worker-3", peer)] for peer in WORKERS[:3]] == ["thin", "wan", "wan"]
    assert [found[(peer, "worker-3")] for peer in WORKERS[:3]] == ["wan", "wan", "wan"]
    assert found[("worker-0", "worker-1")] == "lossy" and found[("worker-1", "worker-0")] == "lan"
    assert found[("worker-1", "worker-2")] == "lan"
    assert parse("", PROFILE_NAMES).profile_of("worker-0", "worker-1", "wan") == "wan"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("worker-0 to worker-1: wan", "is not a link (GROUP <-> GROUP: PROFILE"),
        ("worker-0 <-> worker-1: fast", "'fast' is not a profile (lan, wan, lossy, thin)"),
        ("worker-0 <-> worker-9: wan", "no worker-9 in this cluster (worker-0, worker-1, worker-2, worker-3)"),
        ("* <-> *: wan", "one side must name its workers"),
        ("worker-0,worker-1 <-> worker-1: wan", "a worker on both sides (worker-1)"),
        ("worker-0,host-2 -> worker-1: wan", "'host-2' is not a worker's name (worker-N) or *"),
    ],
)
def test_a_bad_clause_is_named_in_one_line(text, message):
    with pytest.raises(ValueError) as raised:
        parse(text, PROFILE_NAMES, WORKERS)
    said = str(raised.value)
    assert said.startswith("`TF_NETWORK_LINKS`: ") and message in said and "\n" not in said, said

"""Links that differ: what `TF_NETWORK_LINKS` (scripts/run --link) says, over the run's profile.

One clause a set of links, clauses separated by `;`, a later clause winning over an earlier one:

    GROUP <-> GROUP: PROFILE     both ways between every worker of one group and every one of the other
    GROUP -> GROUP: PROFILE      one way only: what the first group's workers send the second's

A GROUP is worker names separated by commas, or `*` (every worker not in the other group).
`worker-0,worker-1 <-> worker-2,worker-3: wan` is two racks of two with a slow link between them
(inside each, the run's `--network` profile); `worker-3 <-> *: wan` one distant worker;
`worker-0 -> worker-1: lossy` one direction worse than the other. Every other link keeps the
run's profile. Each worker's shaper shapes what arrives at its worker from each peer by the
profile of that direction (trainer/shaper/__main__.py), and checks each link against it.
Read by scripts/run (checked before anything starts) and by the shapers, so both say the same of
a bad clause.
"""

import dataclasses
import re

VARIABLE = "TF_NETWORK_LINKS"
GRAMMAR = "GROUP <-> GROUP: PROFILE | GROUP -> GROUP: PROFILE (GROUP: worker-N,worker-M,... or *)"

_CLAUSE = re.compile(r"(?P<left>[^<>:-][^<>:]*?)\s*(?P<way><->|->)\s*(?P<right>[^<>:]+?)\s*:\s*(?P<profile>[\w+-]+)")
_WORKER = re.compile(r"worker-\d+")


@dataclasses.dataclass(frozen=True)
class Links:
    """Each clause as (senders, receivers, profile name), in order; None: every other worker."""

    clauses: tuple[tuple[tuple[str, ...] | None, tuple[str, ...] | None, str], ...] = ()

    def profile_of(self, sender: str, receiver: str, default: str) -> str:
        """The profile of what `sender` sends `receiver`: the last clause naming that direction."""
        found = default
        for senders, receivers, profile in self.clauses:
            if _member(sender, senders, receiver, receivers) and _member(receiver, receivers, sender, senders):
                found = profile
        return found


def _member(name: str, group: tuple[str, ...] | None, other: str, other_group: tuple[str, ...] | None) -> bool:
    if group is not None:
        return name in group
    return other_group is not None and name not in other_group and other in other_group


def parse(text: str, profiles, workers: list[str] | None = None) -> Links:
    """The links `text` sets; raises ValueError naming the first bad clause (a profile not among
    `profiles`, or a worker not among `workers` where they are known)."""
    clauses = []
    for clause in (part.strip() for part in text.split(";")):
        if not clause:
            continue
        found = _CLAUSE.fullmatch(clause)
        if not found:
            raise ValueError(f"`{VARIABLE}`: {clause!r} is not a link ({GRAMMAR})")
        left, right = (_group(found[side], clause) for side in ("left", "right"))
        if left is None and right is None:
            raise ValueError(f"`{VARIABLE}`: {clause!r}: one side must name its workers (`*` is the rest)")
        if left is not None and right is not None and set(left) & set(right):
            raise ValueError(
                f"`{VARIABLE}`: {clause!r}: a worker on both sides ({', '.join(sorted(set(left) & set(right)))})"
            )
        if found["profile"] not in profiles:
            raise ValueError(f"`{VARIABLE}`: {clause!r}: {found['profile']!r} is not a profile ({', '.join(profiles)})")
        named = [name for group in (left, right) if group for name in group]
        strangers = [name for name in named if workers is not None and name not in workers]
        if strangers:
            raise ValueError(f"`{VARIABLE}`: {clause!r}: no {strangers[0]} in this cluster ({', '.join(workers)})")
        clauses.append((left, right, found["profile"]))
        if found["way"] == "<->":
            clauses.append((right, left, found["profile"]))
    return Links(tuple(clauses))


def _group(text: str, clause: str) -> tuple[str, ...] | None:
    text = text.strip()
    if text == "*":
        return None
    names = tuple(name.strip() for name in text.split(","))
    bad = [name for name in names if not _WORKER.fullmatch(name)]
    if bad:
        raise ValueError(f"`{VARIABLE}`: {clause!r}: {bad[0]!r} is not a worker's name (worker-N) or *")
    return names

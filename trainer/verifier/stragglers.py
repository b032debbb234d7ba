"""The straggler: the one worker a synchronous cluster waited for, named with a figure.

Every worker's launcher records its training program's usage in its status
(trainer/contract/usage.py): the program's wall time, the CPU time its processes used, and the
cores its container may use. Its busy share, C / (W * L), is the part of what it could have
computed that it did compute. In a synchronous
cluster every step ends in a collective that waits for every worker, so a worker short of CPU
computes all the time (a share near 1) while the others mostly wait for it (a low share); in a
run without a straggler the shares are alike. The line is information, never a failure: a slow
worker still trains the same model.
"""

from collections.abc import Iterable, Mapping

from trainer.contract.usage import Usage

# The rule, from measured runs of the default training on 2 cores (docs/verifier.md, "The slowest
# worker"): a worker slowed to 0.25 or 0.5 CPUs was busy 71-100% against 9-22% on the others (3.9
# to 8.3 times), on a machine loaded by other runs too (the less CPU it gets, the lower its share);
# in normal runs of 2, 3 and 4 workers the shares were 11-37% at 2 CPUs each and 19-75% at 1 CPU
# each, the busiest at most 1.1 times the next. So the busiest worker must be at least this busy ...
BUSY_SHARE = 0.5
# ... and this many times as busy as the next busiest. Both, since either alone misfires: workers
# whose limits add up to more than the machine's cores are evenly busy (the ratio says no), and
# a cluster that mostly waits on its network has large ratios between small shares (the floor says no).
SPREAD = 2.0


def busy_share(usage: Mapping | None) -> float | None:
    """C / (W * L), or None when the usage is missing or not three positive numbers."""
    recorded = Usage.from_record(dict(usage) if isinstance(usage, Mapping) else None)
    return recorded.busy_share() if recorded else None


def slowest_worker(usages: Iterable[tuple[str, Mapping | None]]) -> str | None:
    """One line naming the straggler among (name, usage) pairs, or None when the spread is small."""
    shares = [(share, name, usage) for name, usage in usages if (share := busy_share(usage)) is not None]
    if len(shares) < 2:
        return None
    shares.sort(key=lambda entry: entry[0], reverse=True)
    (top, name, usage), (second, _, _) = shares[0], shares[1]
    if top < BUSY_SHARE or top < SPREAD * second:
        return None
    others = sorted(share for share, _, _ in shares[1:])
    low, high = _percent(others[0]), _percent(others[-1])
    spread = f"{low}%" if low == high else f"{low}-{high}%"
    where = "the other" if len(others) == 1 else "the others"
    return (
        f"slowest worker: {name}, busy {_percent(top)}% of its {_cores(usage['cpu_limit'])} against "
        f"{spread} on {where} (a synchronous cluster runs at its slowest worker's pace)"
    )


def _percent(share: float) -> int:
    return round(share * 100)


def _cores(limit: float) -> str:
    return f"{limit:g} CPU" if limit == 1 else f"{limit:g} CPUs"

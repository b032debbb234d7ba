"""The kernel's part: tbf for one rate, htb for a rate per peer, iptables for loss, redirects into the relay.

Run in the worker's network namespace (the shaper shares it, with NET_ADMIN; the worker itself
keeps no privilege). Every rule carries the comment `tfcluster`, so they are easy to find.
"""

import shlex
import shutil
import subprocess

INTERFACE = "eth0"
COMMENT = ["-m", "comment", "--comment", "tfcluster"]
PARTITION = ["-m", "comment", "--comment", "tfcluster-partition"]


class RuleError(Exception):
    """A tc or iptables command failed; the message is its own."""


def run(*command: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuleError(f"`{' '.join(command)}` failed: {(result.stderr or result.stdout).strip()}")


def iptables() -> str:
    """iptables (nf_tables). Its legacy variant would need CAP_NET_RAW, which the shaper does not have."""
    if not shutil.which("iptables"):
        raise RuleError("iptables is not installed in this image")
    return "iptables"


def _burst(mbit: float) -> int:
    # A bucket of 10 ms at the rate (at least 16 KiB), so the cap holds without starving bursts.
    return max(16384, int(mbit * 1e6 / 8 / 100))


def limit_rate(mbit: float) -> None:
    """Everything the worker sends, at `mbit`: one token bucket on its interface."""
    burst = _burst(mbit)
    run(
        "tc",
        "qdisc",
        "replace",
        "dev",
        INTERFACE,
        "root",
        "tbf",
        "rate",
        f"{mbit:g}mbit",
        "burst",
        str(burst),
        "latency",
        "100ms",
    )


# A class's rate where its link has no cap: far above what a link between containers carries here.
NO_CAP_MBIT = 100_000


def rate_classes(addresses: list[str]) -> dict[str, str]:
    """A class of its own for what the worker sends each address (htb, each filtered by its
    destination; anything else unclassified, sent as it comes), uncapped until `set_class_rate`;
    the class ids by address."""
    run("tc", "qdisc", "replace", "dev", INTERFACE, "root", "handle", "1:", "htb")
    classes = {}
    for number, address in enumerate(sorted(addresses), start=10):
        classes[address] = f"1:{number}"
        _rate_class("add", classes[address], 0)
        match = ["u32", "match", "ip", "dst", f"{address}/32", "flowid", classes[address]]
        run("tc", "filter", "add", "dev", INTERFACE, "parent", "1:", "protocol", "ip", "prio", "1", *match)
    return classes


def set_class_rate(classid: str, mbit: float) -> None:
    """A class of `rate_classes` at `mbit` (0: no cap), from its next packet on."""
    _rate_class("change", classid, mbit)


def _rate_class(verb: str, classid: str, mbit: float) -> None:
    rate, burst = f"{mbit or NO_CAP_MBIT:g}mbit", str(_burst(mbit or NO_CAP_MBIT))
    # An explicit quantum: htb's own (rate / 10) is out of its range at these rates, with a warning.
    shape = ["rate", rate, "ceil", rate, "burst", burst, "cburst", burst, "quantum", "60000"]
    run("tc", "class", verb, "dev", INTERFACE, "parent", "1:", "classid", classid, "htb", *shape)


def set_loss(probability: float, source: str) -> None:
    """What arrives from `source` dropped at `probability` (0: none), in place of its earlier rule."""
    listing = subprocess.run([iptables(), "-w", "-S", "INPUT"], capture_output=True, text=True)
    if listing.returncode != 0:
        raise RuleError(f"`iptables -S INPUT` failed: {listing.stderr.strip()}")
    for rule in listing.stdout.splitlines():
        words = shlex.split(rule)
        if words[:2] == ["-A", "INPUT"] and "statistic" in words and f"{source}/32" in words and "tfcluster" in words:
            run(iptables(), "-w", "-D", *words[1:])
    if probability:
        drop_randomly(probability, source)


def drop_randomly(probability: float, source: str | None = None) -> None:
    """Drops what arrives at the worker at `probability`; only what `source` (an address) sends, if given."""
    run(
        iptables(),
        "-w",
        "-A",
        "INPUT",
        "-i",
        INTERFACE,
        *(["-s", source] if source else []),
        "-m",
        "statistic",
        "--mode",
        "random",
        "--probability",
        f"{probability:.6f}",
        *COMMENT,
        "-j",
        "DROP",
    )


def redirect(port: int, to_port: int) -> None:
    """Connections arriving for `port` go to the relay on `to_port` (only from outside: lo is not eth0)."""
    run(
        iptables(),
        "-w",
        "-t",
        "nat",
        "-A",
        "PREROUTING",
        "-i",
        INTERFACE,
        "-p",
        "tcp",
        "--dport",
        str(port),
        *COMMENT,
        "-j",
        "REDIRECT",
        "--to-ports",
        str(to_port),
    )


# Which way a cut drops packets: `in`, arriving at the worker; `out`, leaving it; `both`.
DIRECTIONS = {"both": (("INPUT", "-i"), ("OUTPUT", "-o")), "in": (("INPUT", "-i"),), "out": (("OUTPUT", "-o"),)}


def _cut_in_place(chain: str, direction: str) -> bool:
    check = [iptables(), "-w", "-C", chain, direction, INTERFACE, *PARTITION, "-j", "DROP"]
    return subprocess.run(check, capture_output=True).returncode == 0


def partition(way: str = "both") -> bool:
    """Cuts the worker off, `way` (a key of DIRECTIONS); False if it already was (the rules are
    never doubled)."""
    done = False
    for chain, direction in DIRECTIONS[way]:
        if not _cut_in_place(chain, direction):
            run(iptables(), "-w", "-I", chain, "1", direction, INTERFACE, *PARTITION, "-j", "DROP")
            done = True
    return done


def heal() -> bool:
    """Removes the cut, whichever way it was; False if there was none."""
    done = False
    for chain, direction in DIRECTIONS["both"]:
        if _cut_in_place(chain, direction):
            run(iptables(), "-w", "-D", chain, direction, INTERFACE, *PARTITION, "-j", "DROP")
            done = True
    return done


def clear() -> int:
    """Removes every rule of this project's (its comments: the profile's and a cut's) and the rate's
    qdisc; the number of rules removed. A warm worker's namespace outlives its runs, each of which
    shapes it again (scripts/run --warm --network)."""
    removed = 0
    for table in ("filter", "nat"):
        listing = subprocess.run([iptables(), "-w", "-t", table, "-S"], capture_output=True, text=True)
        if listing.returncode != 0:
            raise RuleError(f"`iptables -t {table} -S` failed: {listing.stderr.strip()}")
        for rule in listing.stdout.splitlines():
            words = shlex.split(rule)
            if words[:1] == ["-A"] and any(word.startswith("tfcluster") for word in words):
                run(iptables(), "-w", "-t", table, "-D", *words[1:])
                removed += 1
    # No qdisc of its own (the default) is not an error here: nothing to remove.
    subprocess.run(["tc", "qdisc", "del", "dev", INTERFACE, "root"], capture_output=True)
    return removed

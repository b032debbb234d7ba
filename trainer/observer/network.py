"""This host's network counters: what gradients crossing the network leave behind.

Two workers fed the same data with the same seeds train identically without ever synchronizing;
only their traffic tells them apart from a synchronized pair. A container is a host of its own
here (a network namespace), so its interfaces' counters count what it exchanged with its peers;
the loopback, which carries only what it says to itself, is left out. A cluster on one host's
loopback (workers as bare processes) has no counters of its own to read: every byte between its
workers is counted on `lo` as sent and as received alike, with whatever else the host does there;
its traffic is not measured. Read from sysfs, no privilege needed.
"""

from pathlib import Path

NET = Path("/sys/class/net")


def on_loopback(addresses) -> bool:
    """Whether every `host:port` is this host's loopback, so that peers talk over `lo`."""
    hosts = [str(address).rsplit(":", 1)[0] for address in addresses]
    return bool(hosts) and all(host == "localhost" or host.startswith("127.") for host in hosts)


def counters(root: Path = NET) -> dict[str, int] | None:
    """Bytes sent and received on every interface but the loopback since it came up; None if unreadable."""
    sent = received = 0
    try:
        for interface in sorted(root.iterdir()):
            if interface.name == "lo":
                continue
            statistics = interface / "statistics"
            sent += int((statistics / "tx_bytes").read_text())
            received += int((statistics / "rx_bytes").read_text())
    except (OSError, ValueError):
        return None
    return {"sent": sent, "received": received}

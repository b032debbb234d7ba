"""Every measured link of a shaped cluster, as a matrix: the verdict's where links differ.

Each worker's shaper reports the round trip it measured to every peer, and, where the links differ
(TF_NETWORK_LINKS: racks, a distant worker, one way worse), the profile it expected of each
(trainer/shaper/topology.py). The record keeps the matrix; the output shows it as a table when
the links differ (with one profile for every link, each worker's `network` line says it all).
"""

from pathlib import Path

from trainer.contract import shaping


def matrix(directory: Path, names: list[str]) -> dict[str, dict[str, dict]]:
    """{worker: {peer: {"rtt_ms", "profile"}}} for every worker whose shaper reported, with
    "throughput_mbit" where the link has a rate to measure."""
    found = {}
    for name in names:
        report = shaping.read_report(str(directory), name)
        if report is None:
            continue
        found[name] = {
            link["peer"]: {"rtt_ms": link["rtt_ms"], "profile": link.get("profile", report.get("profile"))}
            | ({"throughput_mbit": link["throughput_mbit"]} if link.get("throughput_mbit") is not None else {})
            for link in report.get("links", [])
        }
    return found


def lines(links: dict[str, dict[str, dict]]) -> list[str]:
    """The matrix as a table, if its links differ; none otherwise."""
    if len({link["profile"] for row in links.values() for link in row.values()}) < 2:
        return []
    # Every worker a row measured, in order: a worker whose shaper never reported is a column alone.
    columns = sorted({*links, *(peer for row in links.values() for peer in row)}, key=_index)
    cells = [[row, *("-" if row == peer else _cell(links[row].get(peer)) for peer in columns)] for row in links]
    header = ["links", *columns]
    widths = [max(len(line[column]) for line in [header, *cells]) for column in range(len(header))]
    table = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *cells]
    ]
    return ["links: the round trip each row's worker measured to each column's, and the profile it expected", *table]


def _cell(link: dict | None) -> str:
    if link is None:
        return "?"
    rate = f" {link['throughput_mbit']:.0f} Mbit/s" if "throughput_mbit" in link else ""
    return f"{link['rtt_ms']:.1f} ms{rate} {link['profile']}"


def _index(name: str) -> tuple[int, str]:
    number = name.rsplit("-", 1)[-1]
    return (int(number), name) if number.isdigit() else (1 << 30, name)

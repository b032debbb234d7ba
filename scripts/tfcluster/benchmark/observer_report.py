"""scripts/benchmark --observer's report (tfcluster/benchmark/observer.py): docs/observer-benchmark.md's body.

It reads only the result of observer.measure (or its JSON, docs/observer-benchmark.json): nothing
here measures. The decisive figure is each program's median paired ratio (with the observer over
without) against the target; how far the pairs spread says how much one pair can be trusted. The
same ratios of the two processes' CPU-seconds, which other tenants of the machine change less than
wall time, are shown beside them.
"""

import math
import statistics

TARGET_SHARE = 0.02  # Of the run: the observer's cost end to end, at most.
WALL, CPU = ("without", "with"), ("without_cpu", "with_cpu")  # The keys of a pair's two sides.


def paired(pairs: list[dict], sides: tuple[str, str] = WALL) -> dict:
    """The pairs' ratios (with over without) and differences (with less without), of the figures
    under `sides` (WALL or CPU): medians and ranges, the pairs where the observed side took more,
    and a range the median ratio lies in (`interval`)."""
    without, observed = sides
    ratios = [figures[observed] / figures[without] for figures in pairs]
    differences = [figures[observed] - figures[without] for figures in pairs]
    return {
        "ratio": statistics.median(ratios),
        "lowest": min(ratios),
        "highest": max(ratios),
        "difference": statistics.median(differences),
        "slower": sum(difference > 0 for difference in differences),
        "pairs": len(pairs),
        "interval": interval(ratios),
    }


def interval(values: list[float], wanted: float = 0.9) -> tuple[float, float, float]:
    """The narrowest range between the k-th least and k-th greatest of `values` that holds their
    population's median with at least `wanted` confidence, and that confidence (the sign test's,
    which assumes only that the values are independent); with too few values, the whole range."""
    ordered, count = sorted(values), len(values)
    chosen = (ordered[0], ordered[-1], _covers(count, 1))
    for k in range(2, count // 2 + 1):
        confidence = _covers(count, k)
        if confidence < wanted:
            break
        chosen = (ordered[k - 1], ordered[count - k], confidence)
    return chosen


def _covers(count: int, k: int) -> float:
    """The chance that the k-th least and k-th greatest of `count` values lie either side of the median."""
    outside = sum(math.comb(count, below) for below in range(k)) / 2**count
    return 1 - 2 * outside


def verdict(figures: dict) -> str:
    """Met or not against the target, from the median ratio, with what the interval allows."""
    limit = 1 + TARGET_SHARE
    low, high, confidence = figures["interval"]
    if figures["ratio"] >= limit and low >= limit:
        return f"**not met** ({figures['ratio']:.3f} x; with {confidence:.0%} confidence over {low:.3f} x)"
    if figures["ratio"] < limit and high < limit:
        return f"met ({figures['ratio']:.3f} x; with {confidence:.0%} confidence under {high:.3f} x)"
    met, reaches = ("met", "past") if figures["ratio"] < limit else ("**not met**", "below")
    return (
        f"{met} by the median ({figures['ratio']:.3f} x), within the noise: with {confidence:.0%} confidence "
        f"it lies in {low:.3f} to {high:.3f} x, which reaches {reaches} {limit:.2f}"
    )


def table(result: dict) -> str:
    """docs/observer-benchmark.md's body, from the result of `measure` (or its JSON)."""
    loads = [figures["load"] for pairs in result["paired"].values() for figures in pairs]
    shared = max(loads) > result["cores"]
    lines = [
        f"One run of `scripts/benchmark --observer --runs {result['runs']}` on {result['cores']} cores, "
        f"{result['when']}; every figure is in [observer-benchmark.json](observer-benchmark.json).",
        "",
        "Each program ran as two bare processes (TF_CONFIG on 127.0.0.1 ports, .venv-bench's TensorFlow), started",
        "through the same few lines either way, each on a core of its own, with the observer installed as the",
        "image installs it or not. Its",
        "wall time is until both processes have exited, its CPU-seconds both processes' (user and system). The",
        "two sides of a pair ran back to back, the first side alternating. `load` is the machine's 1-minute",
        f"load average before the pair: from {min(loads):.2f} to {max(loads):.2f} on {result['cores']} cores"
        + (", so other processes were competing for the cores." if shared else "."),
    ]
    summaries = {}
    for name, pairs in result["paired"].items():
        summaries[name] = paired(pairs)
        lines += _pairs_table(f"{name}: {result['programs'][name]['title']}", pairs, summaries[name])
    lines += _examples_table(result["examples"])
    lines += [
        "",
        f"Target: the observer under {TARGET_SHARE:.0%} of the run, end to end (the median paired ratio under "
        f"{1 + TARGET_SHARE:.2f} x): "
        + "; ".join(f"{name}, {verdict(summary)}" for name, summary in summaries.items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


def _pairs_table(title: str, pairs: list[dict], figures: dict) -> list[str]:
    low, high, confidence = figures["interval"]
    spread = figures["highest"] - figures["lowest"]
    cpu = paired(pairs, CPU)
    cpu_low, cpu_high, cpu_confidence = cpu["interval"]
    lines = [
        "",
        f"## {title}",
        "",
        "| pair | first | load | without | with | ratio | difference | CPU-s without | CPU-s with | CPU ratio "
        "| fingerprints (points) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for number, pair_figures in enumerate(pairs, start=1):
        without, observed = (pair_figures[side] for side in WALL)
        cpu_without, cpu_observed = (pair_figures[side] for side in CPU)
        lines.append(
            f"| {number} | {pair_figures['first']} | {pair_figures['load']:.2f} | {without:.2f} s | {observed:.2f} s | "
            f"{observed / without:.3f} | {observed - without:+.2f} s | {cpu_without:.2f} | {cpu_observed:.2f} | "
            f"{cpu_observed / cpu_without:.3f} | {pair_figures['observer_seconds'] * 1000:.1f} ms "
            f"({pair_figures['points']}) |"
        )
    noise = (
        f"The pairs' ratios spread over {spread:.1%}, wider than the {TARGET_SHARE:.0%} target: one pair cannot "
        "tell the observer from the machine's noise, only the median of many can."
        if spread > TARGET_SHARE
        else f"The pairs' ratios spread over {spread:.1%}, within the {TARGET_SHARE:.0%} target."
    )
    return lines + [
        "",
        f"Median ratio {figures['ratio']:.3f} x (pairs {figures['lowest']:.3f} to {figures['highest']:.3f}), "
        f"median difference {figures['difference']:+.2f} s; the observed side slower in {figures['slower']} of "
        f"{figures['pairs']} pairs; with {confidence:.0%} confidence (sign test) the median ratio lies in "
        f"{low:.3f} to {high:.3f} x. {noise}",
        "",
        f"CPU-seconds of both processes: median ratio {cpu['ratio']:.3f} x (pairs {cpu['lowest']:.3f} to "
        f"{cpu['highest']:.3f}), median difference {cpu['difference']:+.2f} CPU-s; more with the observer in "
        f"{cpu['slower']} of {cpu['pairs']} pairs; with {cpu_confidence:.0%} confidence the median ratio lies in "
        f"{cpu_low:.3f} to {cpu_high:.3f} x.",
    ]


def _examples_table(examples: dict[str, list[dict]]) -> list[str]:
    lines = [
        "",
        "## The fingerprints alone, by the observer's own timer",
        "",
        "Each example through `scripts/run`: the busiest worker's fingerprints (each record's `seconds`,",
        "summed) against its training program's wall time as its launcher reports it; medians.",
        "",
        "| example | runs | points recorded | fingerprints (busiest worker) | training program | share |",
        "|---|---|---|---|---|---|",
    ]
    for name, samples in examples.items():
        observer = statistics.median(sample["observer_seconds"] for sample in samples)
        program = statistics.median(sample["program_seconds"] for sample in samples)
        points = max(sample["points"] for sample in samples)
        lines.append(
            f"| {name} | {len(samples)} | {points} | {observer * 1000:.1f} ms | {program:.2f} s | "
            f"{observer / program:.2%} |"
        )
    return lines

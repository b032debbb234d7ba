"""The benchmark's result rendered: docs/benchmark.md's tables (`table`) and docs/benchmark.png (`chart`).

Both read only the result dict of measure.py (or its JSON, docs/benchmark.json): nothing here
measures. matplotlib is imported inside `chart` alone, so that the rest runs under plain python3.
"""

from pathlib import Path

from tfcluster.benchmark.cases import ALLREDUCE_MIB, PROJECT

Row = tuple[str, str, str, str]  # measure, median, ratio, target


def table(result: dict) -> str:
    """docs/benchmark.md's body: the headline table, then scaling, then one run's milestones."""
    lines = _headline(result) + _scaling(result) + _milestones(result) + _notes()
    return "\n".join(lines) + "\n"


def _verdict(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _pairs(ratios: dict, key: str) -> str:
    low, high = ratios[f"{key}_pairs"]
    return f"{ratios[key]:.2f} x tutorial (pairs {low:.2f} to {high:.2f})"


def _headline(result: dict) -> list[str]:
    rows = _run_rows(result) + _edit_and_image_rows(result) + _allreduce_rows(result)
    lines = [
        f"Medians of {result['runs']} alternating runs on {result['cores']} cores, {result['when']}.",
        "",
        "| measure | median | ratio | target |",
        "|---|---|---|---|",
    ]
    return lines + [f"| {name} | {value} | {ratio} | {target} |" for name, value, ratio, target in rows]


def _run_rows(result: dict) -> list[Row]:
    """The headline: scripts/run and the Compose round trip against the tutorial, and Compose's floor."""
    medians, ratios, targets = result["medians"], result["ratios"], result["targets"]
    return [
        (
            "**`scripts/run`** (image built), to its exit",
            f"{medians['scripts_run_seconds']:.2f} s",
            _pairs(ratios, "scripts_run_over_tutorial"),
            f"<= {targets['scripts_run_over_tutorial']:.2f} x: "
            + _verdict(ratios["scripts_run_over_tutorial"] <= targets["scripts_run_over_tutorial"]),
        ),
        (
            "The tutorial's program, two bare processes launched as the tutorial does",
            f"{medians['tutorial_seconds']:.2f} s",
            "",
            "",
        ),
        (
            "Compose round trip: `up --exit-code-from verifier verifier` to the verdict, then `down`",
            f"{medians['compose_round_trip_seconds']:.2f} s",
            _pairs(ratios, "round_trip_over_tutorial"),
            f"<= {targets['round_trip_over_tutorial']:.2f} x: "
            + _verdict(ratios["round_trip_over_tutorial"] <= targets["round_trip_over_tutorial"]),
        ),
        (
            "Compose's fixed cost: the same round trip, every container running `python -c pass`",
            f"{medians['compose_floor_seconds']:.2f} s (bare: {medians['bare_floor_seconds']:.2f} s)",
            f"{ratios['floor_over_tutorial']:.2f} x tutorial: the least reachable",
            "",
        ),
    ]


def _edit_and_image_rows(result: dict) -> list[Row]:
    medians, ratios, targets = result["medians"], result["ratios"], result["targets"]
    return [
        (
            "Edit one trainer file, then `scripts/run --dev` (no build)",
            f"{medians['dev_edit_to_verdict_seconds']:.2f} s",
            "",
            f"<= {targets['dev_edit_to_verdict_seconds']:.0f} s: "
            + _verdict(medians["dev_edit_to_verdict_seconds"] <= targets["dev_edit_to_verdict_seconds"]),
        ),
        (
            "Edit one trainer file, then rebuild and `scripts/run`",
            f"{medians['edit_to_verdict_seconds']:.2f} s",
            f"rebuild {medians['rebuild_after_edit_seconds']:.2f} s",
            f"rebuild <= {targets['rebuild_after_edit_seconds']:.0f} s: "
            + _verdict(medians["rebuild_after_edit_seconds"] <= targets["rebuild_after_edit_seconds"]),
        ),
        (
            "Image size",
            f"{result['image_bytes'] / 1e9:.2f} GB",
            f"{ratios['image_over_official']:.2f} x official 1.76 GB; {ratios['image_over_naive']:.2f} x naive 2.13 GB",
            f"<= 1.40 GB: {_verdict(result['image_bytes'] <= targets['image_bytes'])}",
        ),
    ]


def _allreduce_rows(result: dict) -> list[Row]:
    allreduce, target = result["allreduce_mb_per_s"], result["targets"]["allreduce_container_over_process"]
    return [
        (
            f"All-reduce {mib} MiB, containers (processes)",
            f"{allreduce['containers'][mib]:.0f} MB/s ({allreduce['processes'][mib]:.0f} MB/s)",
            f"{ratio:.2f} x processes",
            f">= {target:.2f} x: {_verdict(ratio >= target)}",
        )
        for mib, ratio in result["ratios"]["allreduce_container_over_process"].items()
    ]


def _scaling(result: dict) -> list[str]:
    limit = result["targets"]["scaling_over_limit"]
    lines = [
        "",
        "## Scaling",
        "",
        "The same training with N workers (scripts/workers.py), each taking the same per-worker batch. Program:",
        "the slowest worker's training program, from its start (TensorFlow's import included) to its exit, as its",
        "launcher reports it. CPU-bound limit: the least that time can be on this machine, N times one worker's",
        "CPU-seconds (the 1-worker run's) over the cores, and never less than one worker alone.",
        "",
        "| workers | time to verdict and `down` | program | CPU-s per worker | CPU-bound limit | program / limit "
        "| target |",
        "|---|---|---|---|---|---|---|",
    ]
    for workers, figures in result["scaling"].items():
        lines.append(
            f"| {workers} | {figures['verdict_seconds']:.2f} s | {figures['program_seconds']:.2f} s | "
            f"{figures['cpu_seconds_per_worker']:.2f} | {figures['cpu_bound_limit_seconds']:.2f} s | "
            f"{figures['over_limit']:.2f} x | <= {limit:.2f} x: {_verdict(figures['over_limit'] <= limit)} |"
        )
    return lines


def _milestones(result: dict) -> list[str]:
    lines = [
        "",
        "## Where one `scripts/run` spends its time",
        "",
        "From the start of `scripts/run` (its set-up, with `down` of the last run, then `up`): when the last",
        "line of each milestone came, medians; the programs start before the rendezvous completes (they",
        "import TensorFlow while the launchers meet).",
        "",
        "| milestone | at | since the one before |",
        "|---|---|---|",
    ]
    before = 0.0
    # In the order they came (their medians), which a slow run may make other than MILESTONES'.
    for name, at in sorted(result["milestones_seconds"].items(), key=lambda item: item[1]):
        lines.append(f"| {name} | {at:.2f} s | {at - before:+.2f} s |")
        before = at
    return lines


def _notes() -> list[str]:
    return [
        "",
        "The tutorial's side is examples/tutorial/multiworker_train.py, as the tutorial launches it: two",
        "processes with TF_CONFIG on 127.0.0.1 ports, the pinned TensorFlow of the image, until both exit.",
        "`scripts/run` is the main job as a user runs it, with the image built, as the Compose project",
        f"{PROJECT}; each pair ran back to back. All-reduce: MB/s is the tensor's size over the median time",
        "of one all-reduce of float32 ones between the two workers (worker 0's figure). The official image",
        "and the naive single-stage build are published figures, not measured here.",
        "",
        "![benchmark chart](benchmark.png)",
    ]


# -- the chart -------------------------------------------------------------------------------------

# The timed cases on the chart's first panel: label, key of result["samples"].
CHARTED = (
    ("tutorial,\nbare", "tutorial_seconds"),
    ("scripts/\nrun", "scripts_run_seconds"),
    ("Compose\nround trip", "compose_round_trip_seconds"),
    ("edit,\n--dev", "dev_edit_to_verdict_seconds"),
    ("edit,\nrebuild", "edit_to_verdict_seconds"),
)


def chart(result: dict, path: Path) -> None:
    """docs/benchmark.png: four panels, the timed cases, one run's milestones, scaling, the all-reduce."""
    # Here, not at the top: matplotlib is .venv-bench's only, and --help runs under the host's python3.
    import matplotlib

    matplotlib.use("Agg")  # No display: the chart is only written to a file.
    import matplotlib.pyplot as pyplot

    figure, ((times, milestones), (scaling, allreduce)) = pyplot.subplots(2, 2, figsize=(14, 9))
    _times_panel(times, result)
    _milestones_panel(milestones, result)
    _scaling_panel(scaling, result)
    _allreduce_panel(allreduce, result)
    figure.suptitle(f"tfcluster benchmark, medians of {result['runs']} runs ({result['when']})")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def _times_panel(axes, result: dict) -> None:
    samples = result["samples"]
    axes.boxplot([samples[key] for _, key in CHARTED], tick_labels=[label for label, _ in CHARTED])
    axes.set_ylabel("seconds")
    axes.set_title("time to verdict and edit loop")


def _milestones_panel(axes, result: dict) -> None:
    ordered = sorted(result["milestones_seconds"].items(), key=lambda item: item[1])
    axes.barh([name for name, _ in ordered], [at for _, at in ordered])
    axes.invert_yaxis()  # The first milestone on top, as the table lists them.
    axes.set_xlabel("seconds from the start of scripts/run")
    axes.set_title("one scripts/run")


def _scaling_panel(axes, result: dict) -> None:
    scaling = result["scaling"]
    workers = sorted(scaling, key=int)  # JSON's keys are strings: "8" would sort before "2".
    axes.plot(workers, [scaling[n]["program_seconds"] for n in workers], "o-", label="program")
    axes.plot(workers, [scaling[n]["cpu_bound_limit_seconds"] for n in workers], "s--", label="limit")
    axes.plot(workers, [scaling[n]["verdict_seconds"] for n in workers], "^:", label="to verdict")
    axes.set_xlabel("workers")
    axes.set_ylabel("seconds")
    axes.set_title(f"scaling on {result['cores']} cores")
    axes.legend()


def _allreduce_panel(axes, result: dict) -> None:
    sizes = [str(mib) for mib in ALLREDUCE_MIB]
    positions = range(len(sizes))
    # The two sides' bars side by side at each size.
    for offset, side in ((-0.2, "processes"), (0.2, "containers")):
        axes.bar(
            [position + offset for position in positions],
            [result["allreduce_mb_per_s"][side][size] for size in sizes],
            width=0.4,
            label=side,
        )
    axes.set_xticks(list(positions), [f"{size} MiB" for size in sizes])
    axes.set_ylabel("MB/s")
    axes.set_title("all-reduce throughput, 2 workers")
    axes.legend()

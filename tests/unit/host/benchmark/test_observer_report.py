"""scripts/benchmark --observer's figures (tfcluster/benchmark/observer.py, observer_report.py), from
pairs and records made up here: the ratios, their range, the target met or not, and the page."""

import json

import pytest
from tfcluster.benchmark import observer, observer_report


def made_up_pair(without: float, observed: float, *, first: str = "without") -> dict:
    """A pair whose CPU-seconds are half its wall seconds, and which took 0.1 CPU-s more observed."""
    return {
        "first": first,
        "load": 1.5,
        "without": without,
        "with": observed,
        "without_cpu": without / 2,
        "with_cpu": without / 2 + 0.1,
        "observer_seconds": 0.008,
        "points": 1,
    }


# Four pairs: ratios 1.01, 0.99, 1.04 and 1.00, so a median of 1.005 and a spread of 5 %.
PAIRS = [
    made_up_pair(10.0, 10.1),
    made_up_pair(10.0, 9.9, first="with"),
    made_up_pair(10.0, 10.4),
    made_up_pair(12.0, 12.0, first="with"),
]
RESULT = {
    "runs": 4,
    "cores": 2,
    "when": "2024-01-01T00:00:00Z",
    "programs": {"tutorial": {"title": "the tutorial's program"}},
    "paired": {"tutorial": PAIRS},
    "examples": {
        "the built-in trainer": [
            {"observer_seconds": 0.010, "points": 3, "program_seconds": 10.0},
            {"observer_seconds": 0.020, "points": 3, "program_seconds": 12.0},
        ]
    },
}


def test_the_pairs_give_the_median_ratio_its_range_and_the_median_difference():
    figures = observer_report.paired(PAIRS)
    assert figures["ratio"] == pytest.approx(1.005)
    assert (figures["lowest"], figures["highest"]) == (pytest.approx(0.99), pytest.approx(1.04))
    assert figures["difference"] == pytest.approx(0.05)  # The median of +0.1, -0.1, +0.4 and 0.
    assert (figures["slower"], figures["pairs"]) == (2, 4)  # A tie is not slower.
    cpu = observer_report.paired(PAIRS, observer_report.CPU)
    assert cpu["ratio"] == pytest.approx(1.02)  # 5.1 over 5.0 in three pairs, 6.1 over 6.0 in one.
    assert (cpu["lowest"], cpu["highest"]) == (pytest.approx(6.1 / 6), pytest.approx(1.02))
    assert (cpu["difference"], cpu["slower"]) == (pytest.approx(0.1), 4)


def test_the_interval_is_the_narrowest_that_holds_the_median_with_the_confidence_asked():
    eight = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]
    # The 2nd least and 2nd greatest of 8: 1 - 2 * (1 + 8) / 256; the 3rd would be only 71 %.
    assert observer_report.interval(eight) == (1.1, 1.6, pytest.approx(0.9296875))
    # Five values: only the whole range reaches 90 % (1 - 2 / 32).
    assert observer_report.interval(eight[:5]) == (1.0, 1.4, pytest.approx(0.9375))
    # Too few for 90 %: the whole range, with what it is worth.
    assert observer_report.interval([3.0, 1.0, 2.0]) == (1.0, 3.0, pytest.approx(0.75))


def figures(ratio: float, high: float) -> dict:
    return {"ratio": ratio, "interval": (0.98, high, 0.93)}


def test_the_target_is_met_by_the_median_and_says_when_the_noise_reaches_past_it():
    assert observer_report.verdict(figures(1.005, 1.015)) == "met (1.005 x; with 93% confidence under 1.015 x)"
    assert observer_report.verdict(figures(1.005, 1.03)) == (
        "met by the median (1.005 x), within the noise: with 93% confidence it lies in 0.980 to 1.030 x, "
        "which reaches past 1.02"
    )
    assert observer_report.verdict(figures(1.02, 1.03)) == (
        "**not met** by the median (1.020 x), within the noise: with 93% confidence it lies in 0.980 to 1.030 x, "
        "which reaches below 1.02"
    )
    clearly_over = {"ratio": 1.05, "interval": (1.03, 1.08, 0.93)}
    assert observer_report.verdict(clearly_over) == "**not met** (1.050 x; with 93% confidence over 1.030 x)"


def test_the_page_shows_every_pair_and_says_the_spread_is_wider_than_the_target():
    text = observer_report.table(RESULT)
    assert "One run of `scripts/benchmark --observer --runs 4` on 2 cores, 2024-01-01T00:00:00Z" in text
    assert "load average before the pair: from 1.50 to 1.50 on 2 cores.\n" in text
    assert "## tutorial: the tutorial's program\n" in text
    assert "| 1 | without | 1.50 | 10.00 s | 10.10 s | 1.010 | +0.10 s | 5.00 | 5.10 | 1.020 | 8.0 ms (1) |" in text
    assert "| 2 | with | 1.50 | 10.00 s | 9.90 s | 0.990 | -0.10 s | 5.00 | 5.10 | 1.020 | 8.0 ms (1) |" in text
    assert "| 4 | with | 1.50 | 12.00 s | 12.00 s | 1.000 | +0.00 s | 6.00 | 6.10 | 1.017 | 8.0 ms (1) |" in text
    assert (
        "Median ratio 1.005 x (pairs 0.990 to 1.040), median difference +0.05 s; the observed side slower in 2 of "
        "4 pairs; with 88% confidence (sign test) the median ratio lies in 0.990 to 1.040 x. The pairs' ratios "
        "spread over 5.0%, wider than the 2% target" in text
    )
    assert (
        "CPU-seconds of both processes: median ratio 1.020 x (pairs 1.017 to 1.020), median difference +0.10 "
        "CPU-s; more with the observer in 4 of 4 pairs; with 88% confidence the median ratio lies in 1.017 to "
        "1.020 x." in text
    )
    assert "| the built-in trainer | 2 | 3 | 15.0 ms | 11.00 s | 0.14% |" in text
    assert text.endswith(
        "Target: the observer under 2% of the run, end to end (the median paired ratio under 1.02 x): tutorial, "
        "met by the median (1.005 x), within the noise: with 88% confidence it lies in 0.990 to 1.040 x, which "
        "reaches past 1.02.\n"
    )


def test_the_page_says_when_other_processes_competed_for_the_cores():
    busy = [{**made_up_pair(10.0, 10.1), "load": 3.25}, made_up_pair(10.0, 10.1)]
    text = observer_report.table({**RESULT, "paired": {"tutorial": busy}})
    assert "from 1.50 to 3.25 on 2 cores, so other processes were competing for the cores.\n" in text


def test_a_spread_within_the_target_is_said_to_be_so():
    steady = [made_up_pair(10.0, 10.0), made_up_pair(10.0, 10.1)]
    text = observer_report.table({**RESULT, "paired": {"tutorial": steady}})
    assert "The pairs' ratios spread over 1.0%, within the 2% target." in text


def test_the_page_is_the_same_from_the_json_it_keeps():
    assert observer_report.table(json.loads(json.dumps(RESULT))) == observer_report.table(RESULT)


def journal(*records: dict) -> str:
    return "".join(json.dumps({"event": "observed", **record}) + "\n" for record in records)


def state(point: str, seconds: float) -> dict:
    return {"kind": "state", "point": point, "seconds": seconds}


def test_the_own_timer_sums_each_workers_fingerprints_and_names_the_busiest():
    figures = observer.own_timer(
        {
            "worker-0": journal({"kind": "strategy"}, state("checkpoint", 0.01), state("end", 0.02)),
            "worker-1": journal(state("checkpoint", 0.02), state("end", 0.02)),
        }
    )
    assert figures["worker-0"] == {"observer_seconds": pytest.approx(0.03), "points": 2}
    assert observer.busiest(figures) == "worker-1"


@pytest.mark.parametrize(
    "worker_1",
    [
        journal(state("checkpoint", 0.01)),  # No end: the program's end went unrecorded.
        journal({"kind": "error", "where": "program_ended"}, state("end", 0.01)),
    ],
)
def test_an_observer_that_did_less_than_its_work_is_refused(worker_1):
    with pytest.raises(ValueError, match="worker-1's observer recorded"):
        observer.own_timer({"worker-0": journal(state("end", 0.01)), "worker-1": worker_1})


def test_records_of_one_worker_are_refused():
    with pytest.raises(ValueError, match=r"records of 1 workers \(\['worker-0'\]\), not 2"):
        observer.own_timer({"worker-0": journal(state("end", 0.01))})


def test_each_pair_alternates_its_first_side(monkeypatch):
    order = []

    def bare_run(program, *, observed):
        order.append("with" if observed else "without")
        if observed:
            return {"seconds": 10.0, "cpu_seconds": 15.0, "observer_seconds": 0.01, "points": 1}
        return {"seconds": 9.0, "cpu_seconds": 14.0}

    monkeypatch.setattr(observer, "bare_run", bare_run)
    figures = [observer.pair(observer.PROGRAMS["tutorial"], number) for number in range(3)]
    assert order == ["without", "with", "with", "without", "without", "with"]
    assert [pair["first"] for pair in figures] == ["without", "with", "without"]
    assert figures[1] | {"load": None} == {
        "first": "with",
        "load": None,
        "without": 9.0,
        "with": 10.0,
        "without_cpu": 14.0,
        "with_cpu": 15.0,
        "observer_seconds": 0.01,
        "points": 1,
    }


def test_each_pair_prints_a_line_of_its_own():
    assert observer.progress("tutorial", made_up_pair(10.0, 10.2), 0, 8) == (
        "observer | pair  1/8 | tutorial    | without  10.00 s | with  10.20 s | 1.020 x | CPU 1.020 x | load 1.50"
    )

"""What the report reads from a worker's timed log: its phases, epochs, observed states and marks."""

import json

import pytest
from tfcluster.report import evidence

T0 = 1_765_000_000.0


def timed(*lines: tuple[float, str]) -> str:
    return "".join(f"{evidence.stamp(T0 + at)} {text}\n" for at, text in lines)


def since(moment: float) -> float:
    """Seconds after T0, to the millisecond (a float of seconds since the epoch holds about 0.2 us)."""
    return round(moment - T0, 3)


def observed(at: float, **fields) -> tuple[float, str]:
    record = {"event": "observed", "kind": "state", "session": "s", "time": T0 + at, **fields}
    # The observer's own time is the record's: the line's stamp here is a second later.
    return at + 1.0, json.dumps(record)


@pytest.mark.parametrize("at", [0.0, 0.5, 12.345678, 86_400.000001])
def test_a_stamp_reads_back_as_the_moment_it_was_written(at):
    assert evidence.engine_time(evidence.stamp(T0 + at)) == pytest.approx(T0 + at, abs=1e-6)


def test_the_engines_nanoseconds_and_zones_are_read_and_anything_else_is_no_time():
    assert evidence.engine_time("2026-12-06T13:00:00.123456789Z") == pytest.approx(1796562000.123456789)
    assert evidence.engine_time("2026-12-06T14:00:00+01:00") == evidence.engine_time("2026-12-06T13:00:00Z")
    assert evidence.engine_time("worker-0") is None
    assert evidence.timed_lines("plain line\n") == [(None, "plain line")]


def test_a_workers_run_is_start_up_rendezvous_import_then_training_with_its_epochs_and_states():
    log = timed(
        (0.2, "launcher | worker-1:12345: listening"),
        (0.5, "launcher | worker-1:12345: waiting for 1 peer(s), up to 60s"),
        (1.5, "launcher | worker-1:12345: all 2 workers agree on the cluster and settings after 1.0s"),
        observed(1.8, kind="strategy", replicas=2),
        (2.0, '{"event": "start", "step": 0}'),
        (3.0, "train | epoch:   1/2   | step:      4 | loss: 0.6000 | accuracy: 0.5000"),
        observed(3.1, point="epoch", index=1, step=4),
        (4.0, "checkpoint | step 8 written"),
        observed(4.2, point="end", index=1, step=8, variables=[["kernel", "trainable"], ["bias", "trainable"]]),
        (5.0, '{"event": "final", "worker": 1}'),
        (5.5, "launcher | worker-1:12345: training program used 3.5s"),
    )
    found = evidence.worker("worker-1", log, {"exit_code": 0})
    assert [(p["phase"], since(p["from"]), since(p["to"])) for p in found["phases"]] == [
        ("start-up", 0.2, 0.5),
        ("rendezvous", 0.5, 1.5),
        ("import", 1.5, 1.8),  # Until the program made its strategy, as the observer saw it.
        ("training", 1.8, 5.0),
    ]
    assert [(e["epoch"], e["step"], e["loss"], e["accuracy"]) for e in found["epochs"]] == [(1, 4, 0.6, 0.5)]
    assert [(s["point"], s["step"], since(s["t"])) for s in found["states"]] == [("epoch", 4, 3.1), ("end", 8, 4.2)]
    assert [s.get("variables") for s in found["states"]] == [None, 2]  # How many were fingerprinted there.
    assert [(m["kind"], m["label"]) for m in found["marks"]] == [
        ("epoch", "epoch 1"),
        ("checkpoint", "step 8 written"),
    ]
    assert found["container"] == {"exit_code": 0}


def test_model_fits_epoch_logs_are_the_metrics_of_a_program_that_prints_none():
    log = timed(observed(2.0, point="epoch", index=1, step=5, logs={"loss": 0.7, "accuracy": 0.4}))
    found = evidence.worker("worker-0", log, None)
    assert found["epochs"] == [{"epoch": 1, "step": 5, "t": pytest.approx(T0 + 2.0), "loss": 0.7, "accuracy": 0.4}]


def test_a_launcher_that_meets_its_peers_again_was_restarted_and_a_failure_and_a_resume_are_marked():
    log = timed(
        (0.5, "launcher | worker-0:12345: waiting for 1 peer(s), up to 60s"),
        (1.0, "launcher | worker-0:12345: all 2 workers agree on the cluster and settings after 0.5s"),
        (4.0, '{"event": "failed", "exit_code": 5, "reason": "lost peer worker-1:12345"}'),
        (9.0, "launcher | worker-0:12345: waiting for 1 peer(s), up to 60s"),
        (10.0, "launcher | worker-0:12345: all 2 workers agree on the cluster and settings after 1.0s"),
        (10.5, '{"event": "start", "step": 500}'),
        (14.0, '{"event": "final", "worker": 0}'),
    )
    found = evidence.worker("worker-0", log, None)
    assert [(p["phase"], since(p["from"]), since(p["to"])) for p in found["phases"]] == [
        ("rendezvous", 0.5, 1.0),
        ("training", 1.0, 4.0),
        ("rendezvous", 9.0, 10.0),
        ("training", 10.0, 14.0),
    ]
    assert [(m["kind"], since(m["t"])) for m in found["marks"]] == [
        ("failed", 4.0),
        ("restart", 9.0),
        ("resumed", 10.5),
    ]
    assert "lost peer worker-1:12345" in found["marks"][0]["label"]


def test_a_program_of_which_nothing_is_known_has_one_training_phase_from_its_first_line_to_its_last():
    found = evidence.worker("worker-0", timed((1.0, "hello"), (3.0, "bye")), None)
    assert [(p["phase"], since(p["from"]), since(p["to"])) for p in found["phases"]] == [("training", 1.0, 3.0)]
    assert evidence.worker("worker-0", "", None)["phases"] == []

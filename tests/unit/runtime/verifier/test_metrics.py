from trainer.verifier.metrics import parse_final_metrics

TUTORIAL_LINE = "worker=0 replicas=2 initial_loss=0.7459 final_loss=0.4168 final_accuracy=0.8281"


def test_reads_the_tutorials_key_value_line():
    log = f"some noise\n{TUTORIAL_LINE}\n"
    assert parse_final_metrics(log) == {
        "worker": 0,
        "replicas": 2,
        "initial_loss": 0.7459,
        "final_loss": 0.4168,
        "final_accuracy": 0.8281,
    }


def test_json_line_wins_over_key_value_line():
    log = TUTORIAL_LINE + '\n{"event": "final", "worker": 0, "replicas": 2, "final_loss": 0.4167739450931549}\n'
    assert parse_final_metrics(log)["final_loss"] == 0.4167739450931549


def test_last_final_line_wins():
    log = '{"event": "final", "replicas": 2, "final_loss": 1.0}\n{"event": "final", "replicas": 2, "final_loss": 2.0}'
    assert parse_final_metrics(log)["final_loss"] == 2.0


def test_ignores_lines_that_are_not_final_metrics():
    log = "\n".join(
        [
            '{"event": "epoch", "loss": 0.5}',
            "{not json",
            "train | epoch:   1/3   | step:      4 | loss: 0.7459 | accuracy: 0.4375",
            "a=1 b=2",  # key=value, but it names no worker and no replicas
            "worker=0 replicas=2 and some prose",
            "[1, 2]",
        ]
    )
    assert parse_final_metrics(log) is None


def test_the_last_final_event_wins_over_other_events_and_key_value_lines():
    log = "\n".join(
        [
            '{"event": "start", "step": 0}',
            '{"event": "final", "worker": 0, "replicas": 2, "final_loss": 1.0}',
            TUTORIAL_LINE,
            '{"event": "final", "worker": 0, "replicas": 2, "final_loss": 0.5}',
            '{"event": "failed", "exit_code": 3, "reason": "trainer: training check failed: x"}',
        ]
    )
    assert parse_final_metrics(log) == {"event": "final", "worker": 0, "replicas": 2, "final_loss": 0.5}

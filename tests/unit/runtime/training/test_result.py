import json

import pytest

from trainer.contract.console import failed_event
from trainer.contract.exitcodes import ExitCode
from trainer.training.failure import check_failed, configuration_failed
from trainer.training.outcome import EpochResult, TrainingCheckFailed, TrainingResult, check
from trainer.training.output import epoch_line, final_json, final_line, start_json


def result(*, replicas=2, losses=(0.7459, 0.5991, 0.4168), accuracy=0.8281):
    epochs = tuple(EpochResult(epoch=i + 1, loss=loss, accuracy=accuracy) for i, loss in enumerate(losses))
    return TrainingResult(worker=1, workers=2, replicas=replicas, epochs=epochs, steps=12)


def test_a_good_run_passes_the_tutorials_checks():
    check(result(), min_accuracy=0.75)


@pytest.mark.parametrize(
    ("run", "message"),
    [
        (result(replicas=1), "replicas (1) differ from the worker count (2)"),
        (result(losses=(0.5, 0.6)), "final_loss (0.6000) is not below initial_loss (0.5000)"),
        (result(accuracy=0.75), "final_accuracy (0.7500) is not above 0.75"),
    ],
)
def test_each_check_can_fail(run, message):
    with pytest.raises(TrainingCheckFailed, match=message.replace("(", r"\(").replace(")", r"\)")):
        check(run, min_accuracy=0.75)


def test_final_lines_carry_the_tutorials_form_and_full_precision_json():
    run = result(losses=(0.7459478378295898, 0.4167739450931549), accuracy=0.828125)
    assert final_line(run) == "worker=1 replicas=2 initial_loss=0.7459 final_loss=0.4168 final_accuracy=0.8281"
    record = json.loads(final_json(run))
    assert record == {
        "event": "final",
        "worker": 1,
        "workers": 2,
        "replicas": 2,
        "epochs": 2,
        "steps": 12,
        "initial_loss": 0.7459478378295898,
        "final_loss": 0.4167739450931549,
        "final_accuracy": 0.828125,
    }


def test_epoch_line_is_fixed_width_and_greppable():
    line = epoch_line(EpochResult(epoch=2, loss=0.59911, accuracy=0.640625), epochs=3, step=8)
    assert line == "train | epoch:   2/3   | step:      8 | loss: 0.5991 | accuracy: 0.6406"


def test_start_event_says_the_step_a_run_starts_at():
    assert start_json(0) == '{"event": "start", "step": 0}'
    assert json.loads(start_json(250)) == {"event": "start", "step": 250}


def test_failed_event_carries_the_exit_code_as_a_number_and_the_reason():
    line = failed_event(ExitCode.TRAINING_CHECK_FAILED, "trainer: training check failed: x")
    assert line == '{"event": "failed", "exit_code": 3, "reason": "trainer: training check failed: x"}'


def test_a_failed_check_is_a_line_on_stderr_and_an_event_on_stdout(capsys):
    assert check_failed("final_accuracy (0.8281) is not above 0.99") == ExitCode.TRAINING_CHECK_FAILED
    printed = capsys.readouterr()
    line = "trainer: training check failed: final_accuracy (0.8281) is not above 0.99"
    assert printed.err == line + "\n"
    assert json.loads(printed.out) == {"event": "failed", "exit_code": 3, "reason": line}


def test_a_config_error_is_the_one_config_error_line_and_an_event_on_stdout(capsys):
    reason = "the workers would resume from different steps (this one from 4, the mean is 2)"
    assert configuration_failed(reason) == ExitCode.CONFIG_ERROR
    printed = capsys.readouterr()
    assert printed.err == f"trainer: config error: {reason}\n"
    assert json.loads(printed.out) == {"event": "failed", "exit_code": 2, "reason": f"trainer: config error: {reason}"}

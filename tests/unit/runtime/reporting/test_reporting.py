"""trainer.reporting: the final-metrics line a program of the user's own prints, read back by the verifier."""

import io
import json
import subprocess
import sys
import types
from fractions import Fraction

import pytest

from tests.conftest import ROOT
from tests.observations import records
from trainer.reporting import final_metrics_callback, final_record, fit_metrics, report_final
from trainer.verifier.metrics import parse_final_metrics
from trainer.verifier.verdict import WorkerReport, judge

TF_CONFIG = '{"cluster": {"worker": ["worker-0:12345", "worker-1:12345"]}, "task": {"type": "worker", "index": 1}}'


class Strategy:
    """Stands in for a tf.distribute strategy: all report_final reads of one."""

    def __init__(self, replicas):
        self.num_replicas_in_sync = replicas


class Float32:
    """Stands in for a NumPy float32 or a scalar tensor: a number that is no Python float."""

    def __init__(self, value):
        self.value = value

    def __float__(self):
        return float(self.value)


class Int64:
    """Stands in for a NumPy int64: an integer that is no Python int."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def printed(**arguments) -> tuple[dict, str]:
    stream = io.StringIO()
    record = report_final(stream=stream, **arguments)
    return record, stream.getvalue()


def test_report_final_prints_one_json_line_the_verifier_reads():
    record, output = printed(
        metrics={"final_loss": 0.41677, "final_accuracy": 0.828125}, strategy=Strategy(2), worker=1
    )
    assert output.count("\n") == 1
    assert json.loads(output) == record
    assert record == {"event": "final", "worker": 1, "replicas": 2, "final_loss": 0.41677, "final_accuracy": 0.828125}
    assert parse_final_metrics(f"some noise\n{output}") == record


def test_two_workers_reports_pass_the_verifier():
    reports = []
    for index in (0, 1):
        _, output = printed(metrics={"final_loss": 0.5}, replicas=2, worker=index)
        log = output + records(index)  # What the observer adds, as in every run on the cluster.
        reports.append(WorkerReport(name=f"worker-{index}", state="exited", exit_code=0, log=log))
    verdict = judge(reports, expected_workers=2)
    assert verdict.passed
    assert verdict.metrics == {"replicas": 2, "final_loss": 0.5}


def test_the_worker_is_the_task_index_of_tf_config_or_of_the_template():
    assert final_record({}, replicas=2, environ={"TF_CONFIG": TF_CONFIG})["worker"] == 1
    template = {"TF_WORKER_HOSTS": "worker-0,worker-1,worker-2", "TF_TASK_INDEX": "2"}
    assert final_record({}, replicas=3, environ=template)["worker"] == 2
    # Without a cluster, TensorFlow runs the program as a single worker, and so does this.
    assert final_record({}, replicas=1, environ={})["worker"] == 0
    # Given, it wins.
    assert final_record({}, replicas=2, worker=0, environ={"TF_CONFIG": TF_CONFIG})["worker"] == 0


def test_a_broken_tf_config_is_named():
    with pytest.raises(ValueError, match=r"cannot tell which worker this is \(pass worker=\): TF_CONFIG is not valid"):
        final_record({}, replicas=2, environ={"TF_CONFIG": "{not json"})


def test_the_replicas_come_from_the_strategy_or_the_argument_and_must_agree():
    assert final_record({}, strategy=Strategy(Int64(4)), worker=0)["replicas"] == 4
    assert final_record({}, replicas=Int64(2), worker=0)["replicas"] == 2
    assert final_record({}, strategy=Strategy(2), replicas=2, worker=0)["replicas"] == 2
    with pytest.raises(ValueError, match=r"replicas=3, but the strategy trains 2 replicas in sync"):
        final_record({}, strategy=Strategy(2), replicas=3, worker=0)
    with pytest.raises(ValueError, match=r"needs the number of replicas: pass strategy= \(or replicas=\)"):
        final_record({}, worker=0)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"replicas": 0, "worker": 0}, ValueError, r"replicas \(0\) must be at least 1"),
        ({"replicas": 2.0, "worker": 0}, TypeError, r"replicas \(2.0\) must be an integer"),
        ({"replicas": True, "worker": 0}, TypeError, r"replicas \(True\) must be an integer"),
        ({"replicas": 2, "worker": -1}, ValueError, r"worker \(-1\) must be at least 0"),
        ({"replicas": 2, "worker": "0"}, TypeError, r"worker \('0'\) must be an integer"),
    ],
)
def test_bad_identities_are_refused(arguments, error, message):
    with pytest.raises(error, match=message):
        final_record({}, **arguments)


def test_metrics_become_plain_json_values():
    metrics = {
        "loss": Float32(0.25),
        "steps": Int64(70),
        "epochs": 3,
        "ok": True,
        "note": "fine",
        "rate": Fraction(1, 2),
    }
    record = final_record(metrics, replicas=2, worker=0)
    assert record["loss"] == 0.25 and type(record["loss"]) is float
    assert record["steps"] == 70 and type(record["steps"]) is int
    assert record["rate"] == 0.5
    assert {key: record[key] for key in ("epochs", "ok", "note")} == {"epochs": 3, "ok": True, "note": "fine"}
    json.dumps(record)


@pytest.mark.parametrize("key", ["event", "worker", "replicas"])
def test_a_metric_may_not_take_the_place_of_the_identity(key):
    with pytest.raises(ValueError, match=f"metric `{key}` is set by report_final itself"):
        final_record({key: 1}, replicas=2, worker=0)


def test_a_metric_that_is_no_number_is_refused():
    with pytest.raises(TypeError, match=r"metric `weights` \(\[1, 2\]\) is neither a number nor a string"):
        final_record({"weights": [1, 2]}, replicas=2, worker=0)
    with pytest.raises(TypeError, match="metric name 3 is not a string"):
        final_record({3: 1.0}, replicas=2, worker=0)


def test_fit_metrics_name_the_last_epochs_logs_as_final_and_keep_the_first_loss():
    assert fit_metrics(epochs=3, last_logs={"loss": 0.4, "accuracy": 0.8}, initial_loss=0.7) == {
        "epochs": 3,
        "initial_loss": 0.7,
        "final_loss": 0.4,
        "final_accuracy": 0.8,
    }
    assert fit_metrics(epochs=3, last_logs={"loss": 0.4}) == {"epochs": 3, "final_loss": 0.4}


# -- the Keras callback, on a stand-in for Keras ----------------------------------------------------


class Callback:
    """Stands in for keras.callbacks.Callback: what `fit` sets on a callback before it calls it."""

    def set_model(self, model):
        self.model = model


STAND_IN_KERAS = types.SimpleNamespace(callbacks=types.SimpleNamespace(Callback=Callback))


def fit(callback, epochs: list[dict], *, first_epoch=0, replicas=2):
    """Calls the callback as `fit` does, for a model built under a strategy of `replicas`."""
    callback.set_model(types.SimpleNamespace(distribute_strategy=Strategy(replicas)))
    callback.on_train_begin({})
    for epoch, logs in enumerate(epochs, first_epoch):
        callback.on_epoch_end(epoch, logs)
    callback.on_train_end({})


def test_the_callback_reports_when_fit_ends_with_the_models_strategy():
    stream = io.StringIO()
    callback = final_metrics_callback(worker=1, keras=STAND_IN_KERAS, stream=stream)
    assert isinstance(callback, Callback)
    assert type(callback).__name__ == "FinalMetrics"
    fit(callback, [{"loss": Float32(0.75), "accuracy": 0.5}, {"loss": 0.5, "accuracy": Float32(0.625)}])
    assert json.loads(stream.getvalue()) == {
        "event": "final",
        "worker": 1,
        "replicas": 2,
        "epochs": 2,
        "initial_loss": 0.75,
        "final_loss": 0.5,
        "final_accuracy": 0.625,
    }


def test_the_callback_takes_the_strategy_or_replicas_it_is_given_over_the_models():
    for given in ({"strategy": Strategy(4)}, {"replicas": 4}):
        stream = io.StringIO()
        fit(final_metrics_callback(worker=0, keras=STAND_IN_KERAS, stream=stream, **given), [{"loss": 1.0}])
        assert json.loads(stream.getvalue())["replicas"] == 4


def test_a_resumed_fit_reports_all_its_epochs_but_no_initial_loss_of_its_own():
    stream = io.StringIO()
    fit(final_metrics_callback(worker=0, keras=STAND_IN_KERAS, stream=stream), [{"loss": 0.5}], first_epoch=2)
    assert json.loads(stream.getvalue()) == {
        "event": "final",
        "worker": 0,
        "replicas": 2,
        "epochs": 3,
        "final_loss": 0.5,
    }


def test_a_fit_without_an_epoch_reports_nothing_and_a_second_fit_starts_afresh():
    stream = io.StringIO()
    callback = final_metrics_callback(worker=0, keras=STAND_IN_KERAS, stream=stream)
    fit(callback, [])
    assert stream.getvalue() == ""
    fit(callback, [{"loss": 2.0}])
    fit(callback, [{"loss": 1.0}])
    assert [json.loads(line)["initial_loss"] for line in stream.getvalue().splitlines()] == [2.0, 1.0]


def test_importing_the_package_imports_neither_tensorflow_nor_keras():
    check = (
        "import sys, trainer.reporting; "
        "print(sorted(name for name in ('tensorflow', 'keras', 'tf_keras', 'numpy') if name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"

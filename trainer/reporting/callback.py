"""A Keras callback that reports the final metrics when `Model.fit` ends, for tf-keras and Keras 3 alike.

Keras is not imported here: `final_metrics_callback` subclasses the Callback of the Keras the
program trains with, when it is called. By default that is `tf.keras`, which is tf-keras when the
program runs with TF_USE_LEGACY_KERAS=1 (Keras 3's `fit` fails under MultiWorkerMirroredStrategy:
docs/bring-your-own.md, "Keras model.fit") and Keras 3 otherwise.
"""

from collections.abc import Mapping

from trainer.reporting.final import report_final


def fit_metrics(*, epochs: int, last_logs: Mapping[str, object], initial_loss=None) -> dict:
    """The metrics a run of `fit` reports: `final_` and each key of the last epoch's logs, and more.

    `epochs` counts every epoch trained, those before a resumption included; `initial_loss` is the
    first epoch's loss, left out when this run did not train the first epoch (it resumed, from
    BackupAndRestore's state, after it), as it would be another run's.
    """
    metrics: dict[str, object] = {"epochs": epochs}
    if initial_loss is not None:
        metrics["initial_loss"] = initial_loss
    metrics.update({f"final_{name}": value for name, value in last_logs.items()})
    return metrics


def final_metrics_callback(
    *, strategy=None, replicas: int | None = None, worker: int | None = None, keras=None, stream=None
):
    """A `FinalMetrics` callback: at the end of `fit`, `report_final` with the epochs' logs (`fit_metrics`).

    The replicas are the strategy's, or else those of the strategy the model was built under
    (`model.distribute_strategy`); `worker` and `stream` are as `report_final` takes them. `keras`
    is the Keras module whose Callback it subclasses (default: `tf.keras`); pass `tf_keras` or
    `keras` when the program imports one of them directly rather than through `tf.keras`.
    """
    if keras is None:
        import tensorflow  # The program's own, imported already: Keras is needed, and only now.

        keras = tensorflow.keras

    class FinalMetrics(keras.callbacks.Callback):
        """Keeps the first epoch's loss and the last epoch's logs; reports them when training ends."""

        def __init__(self):
            super().__init__()
            self._start_afresh()

        def on_train_begin(self, logs=None):
            self._start_afresh()  # Each `fit` reports its own epochs, a second one included.

        def _start_afresh(self):
            self._initial_loss, self._last_logs, self._epochs = None, None, 0

        def on_epoch_end(self, epoch, logs=None):
            logs = dict(logs or {})
            if epoch == 0:
                self._initial_loss = logs.get("loss")
            self._last_logs, self._epochs = logs, epoch + 1

        def on_train_end(self, logs=None):
            if self._last_logs is None:
                return  # No epoch ended: nothing to report, and the verifier says so.
            metrics = fit_metrics(epochs=self._epochs, last_logs=self._last_logs, initial_loss=self._initial_loss)
            in_sync = strategy
            if strategy is None and replicas is None:
                in_sync = self.model.distribute_strategy  # The one the model was built under.
            report_final(metrics, strategy=in_sync, replicas=replicas, worker=worker, stream=stream)

    return FinalMetrics()

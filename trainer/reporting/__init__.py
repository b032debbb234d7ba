"""Reporting from a training program of your own: the final-metrics line the verifier reads, in one call.

    from trainer.reporting import report_final
    report_final({"final_loss": loss, "final_accuracy": accuracy}, strategy=strategy)

or, for Keras `Model.fit`, a callback that reports the last epoch's logs when `fit` ends:

    from trainer.reporting import final_metrics_callback
    model.fit(dataset, epochs=3, callbacks=[final_metrics_callback()])

Both print one JSON line, `{"event": "final", "worker": N, "replicas": R, ...}`, as this
project's trainer does (trainer/training/output.py; read by trainer/verifier/metrics.py). The
image has `/app` on PYTHONPATH, so this package imports in any program the workers run.

Importing it imports neither TensorFlow nor Keras: only the callback needs Keras, and takes it
from TensorFlow when it is made, by then imported by the program anyway. Otherwise it imports the
standard library and the shared contract (trainer.contract) only.
"""

from trainer.reporting.callback import final_metrics_callback, fit_metrics
from trainer.reporting.final import final_record, report_final

__all__ = ["final_metrics_callback", "final_record", "fit_metrics", "report_final"]

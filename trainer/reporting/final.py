"""The final-metrics record a program prints for the verifier: who reports, how many replicas, what metrics."""

import json
import operator
import os
import sys
from collections.abc import Mapping

from trainer.contract import cluster

# Keys the record sets from the arguments, never from the metrics: the verifier reads `worker` as
# who reported, and checks `replicas` (how many trained together) against the cluster's size.
IDENTITY_KEYS = ("event", "worker", "replicas")


def final_record(
    metrics: Mapping[str, object],
    *,
    strategy=None,
    replicas: int | None = None,
    worker: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict:
    """The record `report_final` prints: `{"event": "final", "worker": N, "replicas": R, **metrics}`.

    `replicas` is the strategy's `num_replicas_in_sync` unless given; one of the two is needed, as
    the verifier checks that every worker trained with all the others. `worker` is this worker's
    index in TF_CONFIG (or the cluster template's TF_TASK_INDEX) unless given, and 0 for a program
    run without either, as TensorFlow itself then runs it: alone. Every metric must be a number or
    a string; a NumPy scalar or a TensorFlow scalar becomes a Python number.
    """
    record = {"event": "final", "worker": _worker(worker, os.environ if environ is None else environ)}
    record["replicas"] = _replicas(strategy, replicas)
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"metric name {key!r} is not a string")
        if key in IDENTITY_KEYS:
            raise ValueError(f"metric `{key}` is set by report_final itself; pass worker= or replicas= instead")
        record[key] = _plain(key, value)
    return record


def report_final(
    metrics: Mapping[str, object],
    *,
    strategy=None,
    replicas: int | None = None,
    worker: int | None = None,
    stream=None,
) -> dict:
    """Prints this worker's final metrics as the one JSON line the verifier reads; returns the record.

    Call it once, at the end, on every worker (not only the chief): the verifier compares the
    workers' metrics with each other. The arguments are those of `final_record`; `stream` is where
    the line goes (default: standard output).
    """
    record = final_record(metrics, strategy=strategy, replicas=replicas, worker=worker)
    print(json.dumps(record), file=sys.stdout if stream is None else stream, flush=True)
    return record


def _worker(worker: int | None, environ: Mapping[str, str]) -> int:
    if worker is not None:
        return _count("worker", worker, minimum=0)
    if not (environ.get("TF_CONFIG", "").strip() or "TF_WORKER_HOSTS" in environ):
        return 0
    try:
        return cluster.from_env(environ).index
    except ValueError as error:
        raise ValueError(f"report_final cannot tell which worker this is (pass worker=): {error}") from None


def _replicas(strategy, replicas: int | None) -> int:
    if strategy is not None:
        in_sync = _count("the strategy's num_replicas_in_sync", strategy.num_replicas_in_sync, minimum=1)
        if replicas is not None and _count("replicas", replicas, minimum=1) != in_sync:
            raise ValueError(f"replicas={replicas}, but the strategy trains {in_sync} replicas in sync")
        return in_sync
    if replicas is None:
        raise ValueError("report_final needs the number of replicas: pass strategy= (or replicas=)")
    return _count("replicas", replicas, minimum=1)


def _count(name: str, value, *, minimum: int) -> int:
    """A whole number of at least `minimum`; a NumPy or TensorFlow integer becomes a Python int."""
    if isinstance(value, bool):
        raise TypeError(f"{name} ({value!r}) must be an integer")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} ({value!r}) must be an integer") from None
    if number < minimum:
        raise ValueError(f"{name} ({number}) must be at least {minimum}")
    return number


def _plain(key: str, value) -> int | float | str | bool:
    """`value` as JSON writes it exactly: a Python number (from NumPy's or TensorFlow's too) or string."""
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    try:
        return operator.index(value)  # NumPy's integers, and integer tensors, are no `int`.
    except TypeError:
        pass
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"metric `{key}` ({value!r}) is neither a number nor a string") from None

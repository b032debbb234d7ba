"""Failures whose cause, and fix, are known: one pattern each, and the one line of advice shown for it.

A program's own error can be long and say little about what to do: Keras 3's PerReplica error, for
one, prints whole tensors. When a failed worker's log matches a pattern here, the verdict shows
the advice instead of any line of the log (trainer/verifier/reasons.py). A new entry needs the
error's exact words, and a test in tests/unit/runtime/verifier/test_diagnoses.py with a log that
shows them.
"""

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    pattern: re.Pattern[str]  # Searched in the whole log, so that it may span lines.
    advice: str  # One line: what went wrong, and what to do about it.


DIAGNOSES = (
    Diagnosis(
        # keras-team/keras#20585 and tensorflow/tensorflow#72388: Keras 3 hands the strategy's
        # per-replica values to ops that take only tensors, on the first step of Model.fit.
        re.compile(r"unsupported type \(<class '[\w.]*\bPerReplica'>\)|Attempt to convert a value \(PerReplica:"),
        "Keras 3's Model.fit does not work under MultiWorkerMirroredStrategy (keras-team/keras#20585): "
        "set TF_USE_LEGACY_KERAS=1 (scripts/run --env TF_USE_LEGACY_KERAS=1) to use tf-keras, which the image has",
    ),
    Diagnosis(
        # TensorFlow configures collective ops once, when its context starts: a strategy made after
        # any other op is too late (the multi-worker tutorial's own warning).
        re.compile(r"Collective ops must be configured at program startup"),
        "MultiWorkerMirroredStrategy was created after other TensorFlow ops: "
        "create it at the start of the program, before any other use of TensorFlow",
    ),
)


# What TensorFlow's coordination service prints when a task's heartbeats stop: its program is frozen
# (stopped, or thrashing) or gone. The worker that prints it is the one that noticed; the task named
# is where to look. Only where the launcher gave no reason of its own: it names a lost peer better.
UNHEALTHY_TASK = re.compile(r"tasks are unhealthy \(stopped sending heartbeats\):\s*/job:worker/replica:0/task:(\d+)")


def unhealthy_peer(log: str) -> str | None:
    """One line naming the task TensorFlow found unhealthy, when the log shows it."""
    found = UNHEALTHY_TASK.search(log)
    if found is None:
        return None
    return (
        f"TensorFlow found worker {found[1]} of the cluster list unhealthy: its program stopped sending "
        "TensorFlow's heartbeats (frozen, stopped or gone); that worker's own line says why"
    )


def diagnose(log: str) -> str | None:
    """The advice of the first known failure that `log` shows, or None when it shows none."""
    for diagnosis in DIAGNOSES:
        if diagnosis.pattern.search(log):
            return diagnosis.advice
    return None

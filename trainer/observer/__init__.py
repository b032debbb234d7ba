"""The observer: what each worker's training program really trained, recorded without a change to it.

Under MultiWorkerMirroredStrategy the metrics a program prints are all-reduced before any worker
sees them, so they agree whatever each worker's own weights are. What proves that the workers
trained in sync is their model state itself: every variable's bytes, identical on every worker
(Megatron-LM's `check_param_hashes_across_dp_replicas`, JAX's `multihost_utils.assert_equal`).

The image loads this package into every Python interpreter it starts, as `_tfcluster_observer`, by
a .pth file in its site-packages (docker/Dockerfile), as it loads the stack dumps
(trainer/contract/stacks.py). It is inert unless the launcher set `VARIABLE` in the program's
environment to a file to record to (trainer/launcher/observing.py), and then it imports nothing
until the program imports TensorFlow (trainer/observer/imports.py). From there it records, as
JSON lines the verifier reads (trainer/observer/journal.py, trainer/verifier/observed.py):

- each strategy the program makes: its class, `num_replicas_in_sync`, the cluster it resolved;
- at each epoch's end of a Keras `Model.fit` (tf-keras and Keras 3), at each checkpoint written
  (`tf.train.Checkpoint`, so `CheckpointManager` and `BackupAndRestore` too) and when the program
  ends: a fingerprint of the model's state (trainer/observer/fingerprint.py), the optimizer's step
  and the epoch's logs;
- how each optimizer's gradients were reduced (trainer/observer/updates.py);
- what each worker's distributed input delivered to its training steps, and apart from it what it
  delivered elsewhere (an evaluation): each example's key, the step that first brought it and
  each step's size (trainer/observer/data.py).

What crossed the network is counted by the launcher, on TensorFlow's own connections
(trainer/launcher/traffic.py).

It never changes what the program computes: it reads each variable's local value (no collective,
so a diverged or dying peer cannot hang it) and the input's elements as the steps take them
(neither their values nor their order), and any error of its own is recorded, not raised.
It imports nothing of this project's (a user's own package named `trainer` stays theirs): its
modules import each other relatively, and its source lives here only to be linted and tested.
"""

import os

VARIABLE = "TFCLUSTER_OBSERVER"

_installed = None  # The observer `install` made, for `epoch_ended`.
_installed_for = None  # The record it was made for: a zygote's child installs again for its own.


def install(environ=os.environ) -> bool:
    """Watches for TensorFlow's import if the launcher asked for a record; returns whether it did."""
    global _installed, _installed_for
    path = environ.get(VARIABLE)
    if not path:
        return False
    if _installed is not None and _installed_for == path:
        # Python's site module reads the venv's site-packages twice here (once for the venv, once
        # as the prefix's), and with it the .pth that calls this: a second observer would be a
        # second progress file writer (seen: one counting the steps, the other the epochs).
        return True
    from . import imports, journal, patches, points, progress  # Standard library only until TensorFlow is there.

    kept = environ.get(progress.VARIABLE)
    observer = points.Observer(journal.Journal(path), progress.Progress(kept) if kept else None)
    for module in patches.TENSORFLOW:
        imports.after_import(module, observer.tensorflow_module_imported)
    imports.after_import("tf_keras", observer.keras_imported)
    imports.after_import("keras", observer.keras_imported)
    _installed, _installed_for = observer, path
    return True


def epoch_ended() -> None:
    """For a training loop of your own: an epoch has ended (Keras `fit`'s epochs are seen without it).

    A loop that steps through one iterator has no epochs anyone else can see; a fault timed `at
    epoch N` (trainer/contract/faults.py) needs them. A program calls it as
    `sys.modules.get("_tfcluster_observer")`, which is None outside this project's image.
    """
    if _installed is not None:
        _installed.loop_epoch_ended()

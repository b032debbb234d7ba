"""A warm worker's main process: `python -P -m trainer.zygote` (scripts/tfcluster/cluster/warm.py).

Binds its socket, imports NumPy, TensorFlow and Keras (counting the threads each import starts),
checks that it may fork (trainer/zygote/threads.py) and that TensorFlow's runtime never started,
then serves its launchers (trainer/zygote/server.py). In a forked child it returns from serving
with the run to become (trainer/zygote/child.py).
"""

import gc
import os
import sys
import time

from trainer.contract import zygote as protocol
from trainer.zygote import child, server, threads


def say(message: str) -> None:
    print(f"zygote | {message}", flush=True)


def main() -> int:
    listener = server.listening_socket(os.environ.get(protocol.SOCKET_VARIABLE) or protocol.SOCKET)
    key = protocol.key_of(os.environ)
    started = time.monotonic()
    started_by, keras = _import_frameworks()
    threads.quiesce()
    unsafe = _runtime_started() or threads.unsafe_reason(started_by)
    key_shown = " ".join(f"{name}={value}" for name, value in key.items() if not name.startswith(("LC_", "LANG")))
    say(
        f"imported TensorFlow and {keras} in {time.monotonic() - started:.1f} s "
        f"({key_shown or 'no key variable set'}); "
        + (f"runs start cold: {unsafe}" if unsafe else "runs are forked from here")
    )
    # Its own PYTHONPATH (the image's /app) is not a child's: each gets its run's.
    kept = child.Kept.now(os.environ.get("PYTHONPATH", ""))
    # Every object so far out of the collector's reach: a child's collections (its own, and the one
    # at its end: trainer/zygote/child.py) then never write to the zygote's objects, whose pages
    # stay shared instead of copied into each child.
    gc.freeze()
    fork = server.Zygote(listener, key=key, unsafe=unsafe, say=say).serve()
    if fork is None:
        return 0
    child.end(child.run(fork.command, fork.environment, fork.cwd, kept), kept)


def _import_frameworks() -> tuple[dict[str, int], str]:
    """Imports what every run imports, never running an op; returns the threads each import started."""
    started_by = {}
    before = len(threads.extra_threads())
    import numpy  # noqa: F401 - NumPy first: its OpenBLAS pool is the one thread expected.

    started_by["NumPy (OpenBLAS's pool)"] = len(threads.extra_threads()) - before
    before += started_by["NumPy (OpenBLAS's pool)"]
    import tensorflow as tf

    # tf.keras is a lazy loader: touching it imports the Keras that TF_USE_LEGACY_KERAS selects.
    keras = tf.keras.Model.__module__.split(".")[0]
    started_by["TensorFlow and Keras"] = len(threads.extra_threads()) - before
    return started_by, {"tf_keras": "tf-keras", "keras": "Keras 3"}.get(keras, keras)


def _runtime_started() -> str | None:
    from tensorflow.python.eager import context

    current = context.context_safe()
    if current is not None and getattr(current, "_context_handle", None) is not None:
        return "TensorFlow's eager context was made during the imports (an op ran)"
    return None


if __name__ == "__main__":
    sys.exit(main())

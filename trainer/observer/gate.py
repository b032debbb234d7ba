"""The start gate for a program of your own: it starts while the workers meet, and waits only
where its TensorFlow would first reach the cluster.

This project's own programs wait at the start gate themselves, after their imports
(trainer/contract/gate.py). A program of yours knows nothing of the gate, so the launcher used to
start it only once every worker had agreed, and its `import tensorflow` (seconds) came after the
rendezvous. Now the launcher starts a Python program of yours at once too, with the gate's pipe
named by VARIABLE, and this holds it at the first call that would reach the cluster:

- `Context.enable_collective_ops`: MultiWorkerMirroredStrategy's server and collectives;
- `Context.set_server_def` and `update_server_def`: `tf.config.experimental_connect_to_cluster`;
- `Server.__init__`: `tf.distribute.Server`, and graph mode's strategies.

Until then (its imports, reading its data, building its model) it runs while the workers meet.
If the launcher closes the gate instead (a mismatch, a peer that never came, a signal), the
program ends there, before its TensorFlow has touched the cluster.

The variable is taken out of the environment at once, and the pipe kept from children: only
this process holds it, and a child of its own (a data loader) never reads a descriptor that in
it is something else.
"""

import functools
import os

# trainer/contract/gate.py's TENSORFLOW_VARIABLE, spelled here: the observer imports nothing of
# this project's (tests/unit/runtime/observer/test_observer_gate.py holds the two the same).
VARIABLE = "TFCLUSTER_TENSORFLOW_GATE_FD"
GO = b"go\n"
# How a program whose gate was closed ends: trainer/contract/exitcodes.py's TERMINATED, as this
# project's own programs end there (its launcher has already said why, and stops it anyway).
CLOSED = 143
MARK = "_tfcluster_gated"

# Where TensorFlow first reaches the cluster, module by module: the methods to hold.
HELD = {
    "tensorflow.python.eager.context": ("Context", ("enable_collective_ops", "set_server_def", "update_server_def")),
    "tensorflow.python.training.server_lib": ("Server", ("__init__",)),
}


class Gate:
    """The pipe from the launcher, read once: every held call waits for the same answer."""

    def __init__(self, descriptor: int):
        import threading  # Only where there is a gate: every Python process of the image loads this module.

        self._descriptor = descriptor
        self._pipe = _identity(descriptor)
        self._lock = threading.Lock()
        self._open: bool | None = None

    def pass_through(self) -> None:
        """Returns once the launcher says go (at once after that); ends the process if it closed the gate."""
        with self._lock:
            if self._open is None:
                self._open = self._read()
        if not self._open:
            os._exit(CLOSED)  # Before TensorFlow reaches the cluster: nothing to save, nothing to shut down.

    def _read(self) -> bool:
        if _identity(self._descriptor) != self._pipe:
            # The program closed the descriptor (and may have opened a file of its own under its
            # number): never read what is not the gate. Not held, then: it may reach the cluster
            # before the workers agree, and its launcher still ends it if they never do.
            return True
        with os.fdopen(self._descriptor, "rb") as pipe:
            return pipe.readline() == GO


def _identity(descriptor: int) -> tuple[int, int] | None:
    """Which pipe the descriptor is (device and inode), or None if it is closed."""
    try:
        found = os.fstat(descriptor)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def take(environ=os.environ) -> Gate | None:
    """The gate named in the environment, taken out of it; None if there is none."""
    named = environ.pop(VARIABLE, None)
    if not named:
        return None
    try:
        descriptor = int(named)
        os.set_inheritable(descriptor, False)
    except (ValueError, OSError):
        return None  # Not a pipe of this process's: nothing to wait for (the launcher never says go to it).
    return Gate(descriptor)


def hold(module, gate: Gate) -> None:
    """Each of HELD's methods in `module` (just imported) waits at the gate before it runs."""
    owner_name, methods = HELD[module.__name__]
    owner = getattr(module, owner_name)
    for name in methods:
        original = getattr(owner, name, None)
        if original is None or getattr(original, MARK, False):
            continue
        setattr(owner, name, _held(original, gate))


def _held(original, gate: Gate):
    @functools.wraps(original)
    def held(*args, **kwargs):
        gate.pass_through()
        return original(*args, **kwargs)

    setattr(held, MARK, True)
    return held

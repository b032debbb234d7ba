"""How a warm worker's launcher asks its zygote for a run: the socket, the messages, and the key.

A warm worker container (`scripts/run --warm`, scripts/tfcluster/cluster/warm.py) stays up between runs with a
zygote as its main process: a Python that has imported TensorFlow and Keras, has run no
TensorFlow op, and forks a fresh child for each run (trainer/zygote/). Each run's launcher is
started in the container by `docker exec` as usual and, instead of starting the program itself,
connects to the zygote's Unix socket and sends one request; the zygote answers on the same
connection, and the connection lasts as long as the child does.

Messages are JSON lines. The request carries the program's command, environment and working
directory, and file descriptors (SCM_RIGHTS) for the child to have at the numbers it lists: its
stdout and stderr (the launcher's pipe) and the start gate. The zygote answers one of:

- `{"started": PID, "key": {...}}`: the child runs; later `{"exited": WAIT_STATUS, "rusage": {...}}`;
- `{"cold": REASON}`: it will not fork this run (an unsafe thread, a command it cannot run as
  `python` would); the launcher starts the program itself, as without a zygote, and says why;
- `{"restarting": REASON}`: the run's key differs from the zygote's; the zygote replaces itself
  (exec, keeping its socket) with one imported under the run's key, and the launcher asks again.

The key is what the interpreter and TensorFlow read once, at start-up or import, and so what a
forked child keeps of its zygote whatever its own environment says (`key_of`).
"""

import array
import json
import os
import socket
from collections.abc import Mapping

# In the worker's own /tmp (a tmpfs per container): only that container's launchers reach it.
# TFCLUSTER_ZYGOTE_SOCKET names another (the zygote's and the launcher's tests do).
SOCKET = "/tmp/tfcluster-zygote/socket"
SOCKET_VARIABLE = "TFCLUSTER_ZYGOTE_SOCKET"
# The listening socket's descriptor, kept across the zygote's exec when it restarts.
LISTENING_FD_VARIABLE = "TFCLUSTER_ZYGOTE_FD"
# Set by `scripts/run --warm` in a warm run's environment: the launcher asks the zygote.
WARM_VARIABLE = "TFCLUSTER_WARM"
MAX_FDS = 8
MAX_MESSAGE = 1 << 20

# What Python reads once when the interpreter starts (hash seed, warnings, stdio, allocator, ...),
# and what TensorFlow, Keras and the libraries under them read once at import: which Keras
# `tf.keras` is, Keras's backend and config folder, oneDNN's kernels, the C++ logging, OpenMP's
# and MKL's thread runtime. More names than needed only costs a restart; one missing would run a
# program with its zygote's value, so when in doubt a name is here.
KEY_NAMES = (
    "TF_USE_LEGACY_KERAS",
    "KERAS_BACKEND",
    "KERAS_HOME",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_CPP_MAX_VLOG_LEVEL",
    "TF_CPP_VMODULE",
    "TF_XLA_FLAGS",
    "TF_DETERMINISTIC_OPS",
    "TF_NUM_INTEROP_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "LANG",
)
KEY_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_", "OMP_", "KMP_", "MKL_", "OPENBLAS_", "GLIBC_TUNABLES")
# Read afresh by a forked child (trainer/zygote/child.py builds sys.path from the run's value).
NOT_KEY = frozenset({"PYTHONPATH"})


def key_of(environ: Mapping[str, str]) -> dict[str, str]:
    """The import-time variables set in `environ`, by name: two runs with equal keys may share a zygote."""
    return {
        name: value
        for name, value in sorted(environ.items())
        if name not in NOT_KEY and (name in KEY_NAMES or name.startswith(KEY_PREFIXES))
    }


def key_differences(zygote: Mapping[str, str], run: Mapping[str, str]) -> list[str]:
    """Each name whose value differs, as `NAME is 'A' here, 'B' for the run` (or unset)."""

    def shown(value):
        return "unset" if value is None else repr(value)

    return [
        f"{name} is {shown(zygote.get(name))} in the zygote, {shown(run.get(name))} for the run"
        for name in sorted(set(zygote) | set(run))
        if zygote.get(name) != run.get(name)
    ]


def send(connection: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = (json.dumps(message) + "\n").encode()
    if fds:
        connection.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        connection.sendall(data)


class Reader:
    """The messages of one connection, a line each, with the descriptors that came with them."""

    def __init__(self, connection: socket.socket):
        self._connection = connection
        self._buffer = b""
        self.fds: list[int] = []

    def next(self) -> dict | None:
        """The next message, or None once the other side has closed the connection."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_MESSAGE:
                raise ValueError("a message over 1 MiB")
            # Close-on-exec: a zygote that execs itself must not keep a launcher's pipe open.
            data, ancillary, _flags, _address = self._connection.recvmsg(
                65536, socket.CMSG_SPACE(MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC
            )
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    descriptors = array.array("i")
                    descriptors.frombytes(payload[: len(payload) - len(payload) % descriptors.itemsize])
                    self.fds.extend(descriptors)
            if not data:
                return None
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def close_fds(self) -> None:
        for descriptor in self.fds:
            os.close(descriptor)
        self.fds = []

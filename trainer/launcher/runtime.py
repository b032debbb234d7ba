"""What the rendezvous compares of the runtime by name: the versions, and the variables that change the computation.

The packages digest (trainer/launcher/digests.py) already tells two sets of packages apart, but
only as two sha256s; the versions that matter most are named here, so that a difference reads
"tensorflow-cpu differs: worker-0:12345 has 2.21.0, worker-1:12345 has 2.20.0". They are read from
the packages' metadata (importlib.metadata), never by importing them: the launcher stays light.
"""

import importlib.metadata
import platform
from collections.abc import Collection, Mapping

from trainer.contract import zygote

# The distributions whose versions change what a step computes: TensorFlow (under either of its
# names) and both Kerases (Keras 3, and Keras 2 as tf-keras, which TF_USE_LEGACY_KERAS selects).
VERSIONED = ("tensorflow", "tensorflow-cpu", "keras", "tf-keras")

# TensorFlow's, Keras's and Python's own variables that change what a worker computes, and are the
# same on every worker by design. Compared as they are (none of them can hold a secret), and only
# where set. Not compared, on purpose: CUDA_VISIBLE_DEVICES (workers sharing a host are given
# different GPUs), thread counts such as OMP_NUM_THREADS (tuned to each host's cores), logging
# (TF_CPP_*), and the TFCLUSTER_FAULT_* faults (injected into one worker on purpose).
COMPUTATION_VARIABLES = (
    "TF_USE_LEGACY_KERAS",  # Keras 2 (tf-keras) or Keras 3: other models, optimizers, collectives.
    "KERAS_BACKEND",  # Keras 3 on another framework altogether.
    "TF_ENABLE_ONEDNN_OPTS",  # oneDNN's kernels round differently.
    "TF_DETERMINISTIC_OPS",
    "TF_CUDNN_DETERMINISTIC",
    "TF_XLA_FLAGS",  # XLA's clustering changes the graph and its kernels.
    # The order of sets and dicts of strings: a program that builds its model or its data from one
    # builds them in another order on each worker.
    "PYTHONHASHSEED",
)


def versions() -> dict[str, str | None]:
    """Python's version, then each of VERSIONED's (None where not installed)."""
    found: dict[str, str | None] = {"Python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def computation_variables(
    environ: Mapping[str, str], *, compared_otherwise: Collection[str] = (), warm: bool = False
) -> dict[str, str]:
    """The COMPUTATION_VARIABLES set in `environ` with their values, but those `compared_otherwise`.

    A user who lists one in TFCLUSTER_USER_ENV has it compared as a user setting already (by hash).
    A warm run adds its zygote's key (trainer/contract/zygote.py): what the program's interpreter
    and TensorFlow were started with, the same on every worker.
    """
    names = [*COMPUTATION_VARIABLES, *(zygote.key_of(environ) if warm else ())]
    return {name: environ[name] for name in dict.fromkeys(names) if name in environ and name not in compared_otherwise}

"""A fingerprint of a model's state: every variable's name, kind, dtype, shape and a hash of its bytes.

Each variable is read through its local components alone (a distributed variable's `values` on
this worker), never through the distributed variable itself: reading an ON_READ variable in
cross-replica context is a collective, which a diverged or dying peer would hang. The hash is the
first 8 bytes of BLAKE2b over the component's bytes: any change of any bit changes it.

The kinds say what the verifier may expect of them under MultiWorkerMirroredStrategy:
- `trainable` and `mirrored` (a distributed ON_WRITE variable: weights, optimizer state, steps):
  the same bytes on every worker, since each applies the same all-reduced update to the same
  broadcast initial value; compared exactly.
- `local` (ON_READ: tf-keras's BatchNormalization moving statistics, Keras metrics): each worker's
  own by design; listed, never compared.
- `outside`: a trainable variable that is no distributed variable at all, made outside
  `strategy.scope()`: trained by each worker alone. Compared, and named as such.
- `plain`: any other variable of no strategy (a counter of the program's own): listed only.
"""

import hashlib

import numpy as np
import tensorflow as tf
from tensorflow.python.distribute import values as distributed_values


def underlying(variable):
    """The TensorFlow variable behind `variable` (a Keras 3 variable keeps one), or None if it has none."""
    if isinstance(variable, tf.Variable):
        return variable
    inner = getattr(variable, "_value", None)  # Keras 3's TensorFlow backend keeps its variable there.
    return inner if isinstance(inner, tf.Variable) else None


def kind(variable) -> str:
    # An integer variable is never trained, whatever its flag says (tf-keras's step counters are
    # `trainable`, as every `tf.Variable` is by default).
    trained = variable.trainable and (variable.dtype.is_floating or variable.dtype.is_complex)
    if isinstance(variable, distributed_values.SyncOnReadVariable):
        return "local"
    if isinstance(variable, distributed_values.DistributedVariable):
        return "trainable" if trained else "mirrored"
    return "outside" if trained else "plain"


def local_value(variable) -> np.ndarray:
    """The variable's value on this worker, read from its first local component: no collective."""
    components = (
        getattr(variable, "values", None) if isinstance(variable, distributed_values.DistributedVariable) else None
    )
    component = components[0] if components else variable
    return component.numpy()


def unique(variables) -> list:
    """The TensorFlow variables behind `variables`, each once, in order, without distributed variables' components."""
    found, seen = [], set()
    for candidate in variables:
        variable = underlying(candidate)
        if variable is None or id(variable) in seen:
            continue
        seen.add(id(variable))
        found.append(variable)
    components = {
        id(component)
        for variable in found
        if isinstance(variable, distributed_values.DistributedVariable)
        for component in variable.values
    }
    return [variable for variable in found if id(variable) not in components]


def fingerprint(variables, trained=()) -> dict:
    """Each variable as `[name, kind, dtype, shape, hash]`, with the state's size in bytes, and the
    names of those among them that are in `trained` (what optimizers updated), with how many of
    `trained` could not be read.

    A variable that cannot be read eagerly (a graph's own, in a TF1-style program) is only counted.
    """
    trained_ids = _ids(trained)
    entries, names, trained_names = [], {}, []
    total = trainable = unreadable = trained_unreadable = 0
    for variable in unique([*variables, *trained]):
        try:
            value = np.asarray(local_value(variable))
        except Exception:  # noqa: BLE001 - one of a graph's own (a TF1-style program), or gone: not state to compare.
            unreadable += 1
            trained_unreadable += id(variable) in trained_ids
            continue
        name = variable.name.removesuffix(":0")
        names[name] = names.get(name, 0) + 1
        if names[name] > 1:  # Two variables of one name (possible outside Keras): told apart by order.
            name = f"{name}#{names[name]}"
        variable_kind = kind(variable)
        entries.append(
            [name, variable_kind, value.dtype.name, "x".join(map(str, value.shape)) or "scalar", _hash(value)]
        )
        total += value.nbytes
        trainable += value.nbytes if variable_kind in ("trainable", "outside") else 0
        if id(variable) in trained_ids:
            trained_names.append(name)
    return {
        "variables": entries,
        "bytes": total,
        "trainable_bytes": trainable,
        "unreadable": unreadable,
        "trained": trained_names,
        "trained_unreadable": trained_unreadable,
    }


def _ids(variables) -> set[int]:
    """The ids of the TensorFlow variables behind `variables`; a distributed variable's component stands for it."""
    found = {id(underlying(variable)) for variable in variables if underlying(variable) is not None}
    for variable in unique(variables):
        distributed = isinstance(variable, distributed_values.DistributedVariable)
        if distributed and any(id(component) in found for component in variable.values):
            found.add(id(variable))
    return found


def step(optimizer) -> int | None:
    """The optimizer's step count on this worker (its `iterations`), or None if it has none."""
    iterations = underlying(getattr(optimizer, "iterations", None))
    return None if iterations is None else int(local_value(iterations))


def step_now(optimizer) -> int | None:
    """The optimizer's step, read eagerly even while a `tf.function` is traced; None when it has none yet
    (a legacy optimizer makes its counter on first use: asking for `iterations` would make it here)."""
    iterations = underlying(getattr(optimizer, "_iterations", None))
    if iterations is None:
        return None
    with tf.init_scope():
        return int(local_value(iterations))


def _hash(value: np.ndarray) -> str:
    data = value.tobytes(order="C") if value.dtype != object else repr(value.tolist()).encode()
    return hashlib.blake2b(data, digest_size=8).hexdigest()

"""Whether the gradients an optimizer applies were all-reduced: the structure of the step, not its bytes.

Identical weights prove synchronization only if the workers' gradients were combined before they
were applied: two workers fed the same data train identically without ever exchanging one. The
bytes on TensorFlow's connections cannot tell gradients from other collectives (a Keras metric
updated outside `strategy.run` all-reduces its state at every step, say), so the observer looks at
how each `apply_gradients` was called, once per traced step (trainer/observer/patches.py):

- in a replica context of more than one replica (inside `strategy.run`), a Keras optimizer
  all-reduces the gradients itself (Keras 3's `_all_reduce_sum_gradients`, tf-keras's
  `apply_gradients`), unless told not to (`skip_gradients_aggregation=True`,
  `experimental_aggregate_gradients=False`): `reduced` is "optimizer";
- otherwise (cross-replica context, outside `strategy.run`; or aggregation skipped) the gradients
  are reduced only if the program reduced them itself: then every gradient is a collective op's
  result (`CollectiveReduceV2`, `CollectiveGatherV2`, `NcclAllReduce`...), in the graph being
  traced, reached through ops that only move values (reshapes, splits and concatenations of
  packing, a scaling, a cast), not through the backward pass (a loss divided by an all-reduced
  batch size is no reduced gradient): `reduced` is "program", else "no" (each worker applies its own);
- run eagerly, a gradient is a value with no graph to read: `reduced` is "unknown".
"""

import tensorflow as tf

COLLECTIVE_WORDS = ("Reduce", "Gather", "AllToAll")
# The ops a reduced gradient may pass through on its way from the collective to the optimizer:
# packing into chunks and back, scaling, casting. Anything else (a MatMul of the backward pass)
# computed a new value, and a collective beyond it reduced something else (a batch size, a loss).
MOVING = frozenset(
    {
        "Identity", "IdentityN", "Reshape", "Cast", "Squeeze", "ExpandDims", "Split", "SplitV", "Concat",
        "ConcatV2", "Pack", "Unpack", "Mul", "RealDiv", "Div", "TruncateDiv", "StridedSlice", "Slice",
    }
)  # fmt: skip
CONSTANT = frozenset({"Const", "Fill", "ZerosLike", "OnesLike"})  # Zeros applied to make slots: no update.
SEARCHED = 10_000  # Ops visited at most per gradient: a bound on the observer's time, never reached by a step.


def how_reduced(gradients, flags: dict) -> dict | None:
    """`context` (inside or outside `strategy.run`), `replicas`, `reduced` (see above), `skipped` (the
    optimizer was told not to aggregate), `gradient_bytes` (the dense gradients' size) for one
    `apply_gradients` or `apply` call; None for gradients that are all constants (zeros applied to
    build an optimizer's slots, no training step)."""
    present = [_tensor(gradient) for gradient in gradients if gradient is not None]
    if present and all(getattr(getattr(t, "op", None), "type", None) in CONSTANT for t in present):
        return None
    context = tf.distribute.get_replica_context()  # None in cross-replica context; the default one with no strategy.
    replicas = int(context.num_replicas_in_sync) if context is not None else None
    inside = context is not None and tf.distribute.has_strategy()
    skipped = flags.get("skip_gradients_aggregation") is True or flags.get("experimental_aggregate_gradients") is False
    found = {
        "context": "inside strategy.run" if inside else "outside strategy.run",
        "replicas": replicas,
        "skipped": skipped,
        "gradient_bytes": dense_bytes(gradients),
    }
    if inside and replicas is not None and replicas > 1 and not skipped:
        return {**found, "reduced": "optimizer"}
    if tf.executing_eagerly():
        return {**found, "reduced": "unknown"}
    reduced = bool(present) and all(_after_collective(tensor) for tensor in present)
    return {**found, "reduced": "program" if reduced else "no"}


def dense_bytes(gradients) -> int:
    """What one all-reduce of these gradients reduces: the dense ones' bytes (an IndexedSlices gradient is
    gathered, its size known only as it runs: left out, so that the bound it makes stays a floor)."""
    total = 0
    for gradient in gradients:
        if gradient is None or isinstance(gradient, tf.IndexedSlices):
            continue
        elements = gradient.shape.num_elements() if hasattr(gradient, "shape") else None
        if elements is not None and hasattr(gradient, "dtype"):
            total += elements * tf.as_dtype(gradient.dtype).size
    return total


def _tensor(gradient):
    return getattr(gradient, "values", gradient)  # IndexedSlices: its values were computed like any gradient.


def _after_collective(tensor) -> bool:
    """Whether `tensor` is a collective's result, moved (reshaped, split, scaled, cast) but not computed
    anew; through a captured tensor, into the graph that captured it."""
    seen, pending = set(), [tensor]
    while pending and len(seen) < SEARCHED:
        current = pending.pop()
        operation = getattr(current, "op", None)
        if operation is None or id(operation) in seen:
            continue
        seen.add(id(operation))
        if _is_collective(operation.type) or _calls_collective(operation):
            return True
        if operation.type == "Placeholder":
            pending += _captured(current)
        elif operation.type in MOVING:
            pending += list(operation.inputs)
    return False


def _captured(placeholder) -> list:
    """The outer graph's tensor a function's placeholder captured, if it is a capture."""
    graph = placeholder.graph
    captures = getattr(graph, "captures", ())
    return [external for external, internal in captures if internal is placeholder]


def _is_collective(kind: str) -> bool:
    return kind.startswith("Nccl") or (kind.startswith("Collective") and any(w in kind for w in COLLECTIVE_WORDS))


def _calls_collective(operation) -> bool:
    """A call of a function (a nested `tf.function`) that returns a collective's result: whether its body
    holds a collective (its outputs are not followed inside: a call that reduces is taken as reducing)."""
    if operation.type not in ("PartitionedCall", "StatefulPartitionedCall"):
        return False
    try:
        name = operation.get_attr("f").name
        called = operation.graph._get_function(name)  # noqa: SLF001 - the only way from a call to its body.
        body = called.graph if hasattr(called, "graph") else None
    except Exception:  # noqa: BLE001 - a function not found here: say nothing of it.
        return False
    return body is not None and any(_is_collective(inner.type) for inner in body.get_operations())

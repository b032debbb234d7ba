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
  are reduced only if the program reduced them itself: then a collective op (`CollectiveReduceV2`,
  `CollectiveGatherV2`, `NcclAllReduce`...) is among the ops every gradient was computed from, in
  the graph being traced: `reduced` is "program", else "no" (each worker applies its own);
- run eagerly, a gradient is a value with no graph to read: `reduced` is "unknown".
"""

import tensorflow as tf

COLLECTIVE_WORDS = ("Reduce", "Gather", "AllToAll")
SEARCHED = 200_000  # Ops visited at most per gradient: a bound on the observer's time, never reached by a step.


def how_reduced(gradients, kwargs: dict) -> dict:
    """`context` (inside or outside `strategy.run`), `replicas`, `reduced` (see above), `skipped` (the
    optimizer was told not to aggregate) for one `apply_gradients` or `apply` call."""
    context = tf.distribute.get_replica_context()  # None in cross-replica context; the default one with no strategy.
    replicas = int(context.num_replicas_in_sync) if context is not None else None
    inside = context is not None and tf.distribute.has_strategy()
    where = "inside strategy.run" if inside else "outside strategy.run"
    skipped = (
        kwargs.get("skip_gradients_aggregation") is True or kwargs.get("experimental_aggregate_gradients") is False
    )
    if inside and replicas is not None and replicas > 1 and not skipped:
        return {"context": where, "replicas": replicas, "reduced": "optimizer", "skipped": False}
    if tf.executing_eagerly():
        return {"context": where, "replicas": replicas, "reduced": "unknown", "skipped": skipped}
    present = [_tensor(gradient) for gradient in gradients if gradient is not None]
    reduced = bool(present) and all(_after_collective(tensor) for tensor in present)
    return {"context": where, "replicas": replicas, "reduced": "program" if reduced else "no", "skipped": skipped}


def _tensor(gradient):
    return getattr(gradient, "values", gradient)  # IndexedSlices: its values were computed like any gradient.


def _after_collective(tensor) -> bool:
    """Whether a collective op is among the ops `tensor` was computed from (in this graph, or a function it calls)."""
    seen, pending = set(), [getattr(tensor, "op", None)]
    while pending and len(seen) < SEARCHED:
        operation = pending.pop()
        if operation is None or id(operation) in seen:
            continue
        seen.add(id(operation))
        if _is_collective(operation.type) or _calls_collective(operation):
            return True
        pending += [source.op for source in operation.inputs] + list(operation.control_inputs)
    return False


def _is_collective(kind: str) -> bool:
    return kind.startswith("Nccl") or (kind.startswith("Collective") and any(w in kind for w in COLLECTIVE_WORDS))


def _calls_collective(operation) -> bool:
    """A call of a function (a nested `tf.function`): whether its body holds a collective anywhere."""
    if operation.type not in ("PartitionedCall", "StatefulPartitionedCall"):
        return False
    try:
        name = operation.get_attr("f").name
        called = operation.graph._get_function(name)  # noqa: SLF001 - the only way from a call to its body.
        body = called.graph if hasattr(called, "graph") else None
    except Exception:  # noqa: BLE001 - a function not found here: say nothing of it.
        return False
    return body is not None and any(_is_collective(inner.type) for inner in body.get_operations())

"""The observer's records (trainer/observer/journal.py) as a worker's log holds them, for hand-made logs.

Real records come from real runs (tests/fixtures/logs/tutorial/ and drift/ are two); the verifier's
unit tests need workers whose state was recorded in particular ways, and these lines are what the
observer prints for a small model.
"""

import json

KERNEL_HASH = "5f3e07210a29644f"
VARIABLES = (
    ("sequential/dense/kernel", "trainable", "float32", "8x16", KERNEL_HASH),
    ("sequential/dense/bias", "trainable", "float32", "16", "1bbf8587888e3937"),
    ("adam/iteration", "mirrored", "int64", "scalar", "a785b0dc6faea625"),
    ("binary_accuracy/total", "local", "float32", "scalar", "ee62417c0b2282de"),
)
START = {"sent": 1000, "received": 1000}


def strategy(index: int, *, workers: int = 2, session: str = "", replicas: int | None = None, port=12345, net=START):
    return {
        "event": "observed", "kind": "strategy", "session": session or f"session{index}", "time": 1.0,
        "class": "MultiWorkerMirroredStrategy", "replicas": workers if replicas is None else replicas,
        "cluster": {"worker": [f"worker-{i}:{port}" for i in range(workers)]},
        "task": {"type": "worker", "index": index}, "net": net,
    }  # fmt: skip


def state(  # noqa: PLR0913 - one keyword per field a test varies.
    index: int, *, point="end", number=1, step=12, variables=VARIABLES, session="", net=None, logs=None, trainable=576,
    trained=None, unreadable=0, trained_unreadable=0,
):  # fmt: skip
    """A state record; `net` defaults to 50 KB sent and received since the strategy's start. `trained`:
    the names of the variables optimizers updated (None: a record from before the observer said)."""
    found = {
        "event": "observed", "kind": "state", "session": session or f"session{index}", "time": 2.0,
        "point": point, "index": number, "step": step, "variables": [list(v) for v in variables],
        "bytes": 584, "trainable_bytes": trainable, "logs": logs or {},
        "net": net or {"sent": START["sent"] + 50_000, "received": START["received"] + 50_000}, "seconds": 0.001,
        "unreadable": unreadable,
    }  # fmt: skip
    if trained is not None:
        found.update(trained=list(trained), trained_unreadable=trained_unreadable)
    return found


TRAINED = ("sequential/dense/kernel", "sequential/dense/bias", "adam/iteration")  # VARIABLES' trained ones.


def lines(*found: dict) -> str:
    return "".join(json.dumps(record) + "\n" for record in found)


def records(index: int, *, workers: int = 2, replicas: int | None = None, port: int = 12345, **state_fields) -> str:
    """A strategy record and the end's state, as worker `index` of `workers` prints them, one per line."""
    return lines(strategy(index, workers=workers, replicas=replicas, port=port), state(index, **state_fields))


def drifted(variables=VARIABLES, name="sequential/dense/kernel", hash_="0000000000000000"):
    """`variables` with `name`'s hash changed: the same model, other bytes."""
    return tuple((n, k, d, s, hash_ if n == name else h) for n, k, d, s, h in variables)


def update(index: int, *, reduced="optimizer", context="inside strategy.run", replicas=2, skipped=False, session=""):
    """How worker `index`'s optimizer reduced its gradients (trainer/observer/updates.py)."""
    return {
        "event": "observed", "kind": "update", "session": session or f"session{index}", "time": 1.5,
        "optimizer": "Adam", "context": context, "replicas": replicas, "reduced": reduced, "skipped": skipped,
    }  # fmt: skip


def connections(sent: int, received: int | None = None) -> dict:
    """The launcher's count of the bytes on its TensorFlow connections (trainer/launcher/traffic.py)."""
    received = sent if received is None else received
    return {"event": "connections", "ports": [12345], "sent": sent, "received": received, "connections": 2, "polls": 9}


def data(index: int, keys, *, use="training", distinct="all", examples=None, batches=(), unit="example", session=""):
    """What worker `index`'s distributed dataset delivered (trainer/observer/data.py): `keys` as integers;
    `distinct` None as the observer writes it past what it counts. Without the steps that brought
    them, as the first records with keys were written (`delivered` gives them)."""
    keys = sorted(keys)
    return {
        "event": "observed", "kind": "data", "session": session or f"session{index}", "time": 1.8, "use": use,
        "deliveries": max(1, len(batches)), "examples": len(keys) if examples is None else examples, "unit": unit,
        "distinct": len(keys) if distinct == "all" else distinct, "keys": [format(key, "016x") for key in keys],
        "batches": list(batches),
    }  # fmt: skip


def delivered(index: int, steps: list[list[int]], *, sketch: int | None = None) -> dict:
    """Worker `index`'s data record as the observer writes it from the keys of each step's batch, in
    order: every key with the step that first brought it, and each step's size; the `sketch`
    smallest distinct keys only, when given."""
    first: dict[int, int] = {}
    for step, batch in enumerate(steps):
        for key in batch:
            first.setdefault(key, step)
    keys = sorted(first)
    kept = keys[:sketch] if sketch else keys
    sizes: list[list[int]] = []
    for batch in steps:
        if sizes and sizes[-1][0] == len(batch):
            sizes[-1][1] += 1
        else:
            sizes.append([len(batch), 1])
    return {
        "event": "observed", "kind": "data", "session": f"session{index}", "time": 1.8, "use": "training",
        "deliveries": len(steps), "examples": sum(map(len, steps)), "unit": "example",
        "distinct": len(keys), "keys": [format(key, "016x") for key in kept], "first": [first[key] for key in kept],
        "sizes": sizes, "batches": [format(hash(tuple(batch)) & (2**64 - 1), "016x") for batch in steps],
    }  # fmt: skip

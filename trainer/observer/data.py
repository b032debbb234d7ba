"""What each worker's input pipeline delivered to its replicas: a key for every example, kept bounded.

Whichever way a program hands a dataset to its strategy (`distribute_datasets_from_function`,
`experimental_distribute_dataset`, as Keras's `fit` does), under any auto-shard policy, each
element its iterator delivers to the replicas passes through one function of TensorFlow's,
`input_lib._create_per_replica`, which the observer wraps (trainer/observer/patches.py). So what
is counted is what the steps took, not what the pipeline prefetched. Run eagerly, the element's
tensors are read at once; traced into a `tf.function`, one op is added beside them that hands them
to Python each time the step runs (`tf.numpy_function`): it reads them and changes nothing the
step computes, nor the order of the elements.

Each example (a row of the batch: the same row of every component) gets a 64-bit key from its
bytes; an element whose components do not share a batch dimension (a ragged or sparse one, or
scalars) is keyed whole. The keys are kept exactly up to `SKETCH` distinct ones, and past that
the `SKETCH` smallest (a bottom-k sketch, whose overlap with another worker's estimates theirs),
each with the delivery (the step) that first brought it, and how many examples each delivery
held: a pipeline that repeats its data brings every example back to some worker, so the verifier
compares the workers within one pass over the data, the steps before any could come back. The
first `BATCHES` batches' keys are kept in order, to name identical batches at the same step.

Where the elements went decides what they count for: those delivered in a traced function that
also applied gradients (or in a function it calls) are training's, those of a function that
applied none (an evaluation) are reported apart, and those delivered eagerly are training's when
the program trained at all. TensorFlow and NumPy are imported only once the program has them.
"""

import hashlib
import threading
import weakref

SKETCH = 2048  # Distinct keys kept per use: exact up to this, a bottom-k sketch past it.
BATCHES = 256  # Batches whose keys are kept in order, from the first.
EXACT = 1 << 17  # Distinct keys counted exactly up to this; estimated from the sketch past it.
_MASK = (1 << 64) - 1


class Stream:
    """The elements delivered at one place: a traced function, or eagerly."""

    def __init__(self):
        self.training = False
        self.deliveries = 0
        self.examples = 0
        self.units: set[str] = set()
        self.batches: list[str] = []
        self.sizes: list[list[int]] = []  # Examples per delivery, run-length: [examples, deliveries].
        self._kept = None  # The smallest distinct keys, sorted (a NumPy array of uint64).
        self._first = None  # The delivery that first brought each kept key (0 for the first).
        self._distinct: set[int] | None = set()  # Every distinct key, while there are few enough.
        self._lock = threading.Lock()  # A traced step's op may run on any of TensorFlow's threads.

    def add(self, arrays: list, per_replica: list[int]) -> None:
        import numpy as np

        keys, unit = _keys(arrays, per_replica)
        if not len(keys):
            return  # A replica with no data left gets an empty batch: nothing was delivered.
        with self._lock:
            delivery = self.deliveries
            self.deliveries += 1
            self.examples += len(keys)
            self.units.add(unit)
            if self.sizes and self.sizes[-1][0] == len(keys):
                self.sizes[-1][1] += 1
            else:
                self.sizes.append([len(keys), 1])
            if len(self.batches) < BATCHES:
                self.batches.append(hashlib.blake2b(keys.tobytes(), digest_size=8).hexdigest())
            distinct = np.unique(keys)
            if self._distinct is not None:
                self._distinct.update(distinct.tolist())
                if len(self._distinct) > EXACT:
                    self._distinct = None
            first = np.full(len(distinct), delivery, dtype=np.int64)
            if self._kept is not None:
                distinct = np.concatenate([self._kept, distinct])
                first = np.concatenate([self._first, first])
            # Sorted by key, then by delivery: a key's first place holds its earliest delivery.
            order = np.lexsort((first, distinct))
            distinct, first = distinct[order], first[order]
            unique = np.concatenate([[True], distinct[1:] != distinct[:-1]])
            self._kept, self._first = distinct[unique][:SKETCH], first[unique][:SKETCH]

    def record(self) -> dict:
        kept = [] if self._kept is None else self._kept.tolist()
        return {
            "deliveries": self.deliveries,
            "examples": self.examples,
            "unit": "example" if self.units == {"example"} else "element",
            "distinct": len(self._distinct) if self._distinct is not None else None,
            "keys": [format(key, "016x") for key in kept],
            "first": [] if self._first is None else self._first.tolist(),
            "sizes": [list(run) for run in self.sizes],
            "batches": list(self.batches),
        }


class Deliveries:
    """Every stream of elements the program's distributed iterators delivered, and which trained."""

    def __init__(self, on_training_step=None):
        self._on_training_step = on_training_step  # Called as each training step takes its input.
        self._streams: list[Stream] = []
        self._by_graph: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._eager: Stream | None = None
        self._epochs: list[int] = []  # The training deliveries so far at each of Keras's epoch ends.
        # Eager deliveries are training's once the program applies gradients (as `records` judges
        # them); a loop that takes its batch eagerly takes its first before its step is traced.
        self._trained = False
        self._eager_before_training = 0

    def epoch_ended(self) -> None:
        """Keras ended an epoch: its steps, and so their deliveries, are done."""
        self._epochs.append(
            sum(stream.deliveries for stream in self._streams if stream.training or stream is self._eager)
        )

    def delivered(self, values) -> None:
        """`values`: the element of each replica this worker feeds, as `_create_per_replica` got them."""
        import tensorflow as tf

        flat = [tf.nest.flatten(value, expand_composites=True) for value in values]
        tensors = [tensor for replica in flat for tensor in replica]
        per_replica = [len(replica) for replica in flat]
        if tf.executing_eagerly():
            if self._eager is None:
                self._eager = self._new()
            self._eager.add([tensor.numpy() for tensor in tensors], per_replica)
            if self._on_training_step is None:
                return
            if self._trained:
                self._on_training_step()
            else:
                self._eager_before_training += 1
            return
        stream = self._new()
        for graph in _enclosing(tf.compat.v1.get_default_graph()):
            self._by_graph.setdefault(graph, []).append(stream)

        def seen(*arrays):
            stream.add(list(arrays), per_replica)
            if stream.training and self._on_training_step is not None:
                self._on_training_step()
            return []

        tf.numpy_function(seen, tensors, [], stateful=True, name="tfcluster_observed_input")

    def training_began(self) -> None:
        """Gradients were applied (or traced to be): the eager deliveries so far were training
        steps' inputs, and every later one is, for the progress that faults are timed by."""
        if self._trained:
            return
        self._trained = True
        for _ in range(self._eager_before_training if self._on_training_step else 0):
            self._on_training_step()

    def trained_in(self, graph) -> None:
        """Gradients were applied in `graph` (being traced): the elements delivered in it, or in a
        function that encloses it, are training's."""
        for enclosing in _enclosing(graph):
            for stream in self._by_graph.get(enclosing, ()):
                stream.training = True

    def records(self, *, trained: bool) -> list[dict]:
        """One record per use: `training`'s, and `other`'s if it had deliveries; `trained`:
        whether the program applied any gradients (then what it delivered eagerly was training's)."""
        if self._eager is not None:
            self._eager.training = trained
        found = []
        for use, training in (("training", True), ("other", False)):
            streams = [stream.record() for stream in self._streams if stream.training == training and stream.deliveries]
            if streams or use == "training":  # Training's always: none delivered says the input was not seen.
                epochs = {"epochs": list(self._epochs)} if training else {}
                found.append({"use": use, **_merged(streams or [Stream().record()]), **epochs})
        return found

    def _new(self) -> Stream:
        stream = Stream()
        self._streams.append(stream)
        return stream


def _enclosing(graph) -> list:
    """`graph` and the traced functions' graphs around it; not the program's global graph (eager's),
    which encloses every top-level function alike."""
    found = []
    while graph is not None and hasattr(graph, "outer_graph"):
        found.append(graph)
        graph = graph.outer_graph
    return found


def _merged(records: list[dict]) -> dict:
    """The streams' records as one, their deliveries in the order the streams began (a function
    traced again, for a last smaller batch, delivers after the one before it)."""
    if len(records) == 1:
        return records[0]
    first: dict[str, int] = {}
    before = 0
    for record in records:
        for key, delivery in zip(record["keys"], record["first"], strict=True):
            first[key] = min(first.get(key, before + delivery), before + delivery)
        before += record["deliveries"]
    keys = sorted(first)
    distinct = [record["distinct"] for record in records]
    return {
        "deliveries": before,
        "examples": sum(record["examples"] for record in records),
        "unit": "example" if all(record["unit"] == "example" for record in records) else "element",
        # Exact when every stream kept all its keys: two streams may have delivered the same example.
        "distinct": len(keys) if all(count is not None and count <= SKETCH for count in distinct) else None,
        "keys": keys[:SKETCH],
        "first": [first[key] for key in keys[:SKETCH]],
        "sizes": [run for record in records for run in record["sizes"]],
        "batches": [batch for record in records for batch in record["batches"]][:BATCHES],
    }


def _keys(arrays: list, per_replica: list[int]):
    """A key per example of every replica's element, and whether they were examples or whole elements."""
    import numpy as np

    keys, unit, start = [], "example", 0
    for count in per_replica:
        components = arrays[start : start + count]
        start += count
        rows = {np.shape(component)[0] if np.ndim(component) else None for component in components}
        if len(rows) == 1 and None not in rows:
            keys.append(_row_keys(components, rows.pop()))
        else:
            unit = "element"
            whole = hashlib.blake2b(digest_size=8)
            for component in components:
                whole.update(_bytes_of(component))
            keys.append(np.array([int(whole.hexdigest(), 16)], dtype=np.uint64))
    return (np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64)), unit


def _row_keys(components: list, rows: int):
    """Each row's key: the components' keys of that row, combined in order."""
    import numpy as np

    combined = np.zeros(rows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for component in components:
            combined = _mix(combined * np.uint64(0x9E3779B97F4A7C15) + _component_keys(component, rows))
    return combined


def _component_keys(component, rows: int):
    """A component's row keys. Numbers: two random linear sums of the row's 32-bit words (the same
    weights on every worker: seeded by the row's length), mixed; collisions are as rare as 64 bits'
    for any two different rows. Strings (and other objects): each row's bytes hashed."""
    import numpy as np

    array = np.asarray(component)
    if array.dtype == object:
        return np.array(
            [int(hashlib.blake2b(_bytes_of(row), digest_size=8).hexdigest(), 16) for row in array.reshape(rows, -1)],
            dtype=np.uint64,
        )
    data = np.ascontiguousarray(array).reshape(rows, -1).view(np.uint8)
    width = data.shape[1]
    if width % 4:
        data = np.pad(data, ((0, 0), (0, 4 - width % 4)))
    words = data.view("<u4").astype(np.uint64)
    first, second = _weights(words.shape[1])
    with np.errstate(over="ignore"):
        one = (words * first).sum(axis=1, dtype=np.uint64) + np.uint64(width)
        two = (words * second).sum(axis=1, dtype=np.uint64)
        return _mix(one ^ ((two << np.uint64(32)) | (two >> np.uint64(32))))


_WEIGHTS: dict[int, tuple] = {}


def _weights(count: int) -> tuple:
    import numpy as np

    if count not in _WEIGHTS:
        generator = np.random.default_rng(count)
        _WEIGHTS[count] = tuple(
            generator.integers(0, _MASK, size=count, dtype=np.uint64, endpoint=True) | np.uint64(1) for _ in range(2)
        )
    return _WEIGHTS[count]


def _mix(values):
    """MurmurHash3's finalizer: every bit of the key depends on every bit of the sums."""
    import numpy as np

    with np.errstate(over="ignore"):
        values = values ^ (values >> np.uint64(33))
        values = values * np.uint64(0xFF51AFD7ED558CCD)
        values = values ^ (values >> np.uint64(33))
        values = values * np.uint64(0xC4CEB9FE1A85EC53)
        return values ^ (values >> np.uint64(33))


def _bytes_of(value) -> bytes:
    import numpy as np

    array = np.asarray(value)
    if array.dtype != object:
        return str(array.dtype).encode() + str(array.shape).encode() + np.ascontiguousarray(array).tobytes()
    return b"\0".join(item if isinstance(item, bytes) else str(item).encode() for item in array.reshape(-1))

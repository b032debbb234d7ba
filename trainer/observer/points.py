"""The observer's points: what it records, and when (trainer/observer/__init__.py says why).

Every event handler here is guarded: an error of the observer's own is recorded once per place,
as a record of kind `error`, and the program goes on as if it were not observed.
"""

import atexit
import functools
import threading
import time
import weakref

from . import data, training
from .training import variables_of

PRUNE_AT = 4096  # References to variables kept before the dead ones are dropped.


def guarded(method):
    """Runs the handler; an exception is recorded (once per handler), never raised into the program."""

    @functools.wraps(method)
    def handler(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - the program must not fail because it is observed.
            if method.__name__ not in self.failed:
                self.failed.add(method.__name__)
                self.journal.write("error", where=method.__name__, error=f"{type(error).__name__}: {error}"[:300])
        return None

    return handler


class Observer:
    def __init__(self, journal, progress=None):
        self.journal = journal
        self._progress = progress  # The training's progress, for faults timed by it (trainer/observer/progress.py).
        self.failed: set[str] = set()
        self._variables: list[weakref.ref] = []  # Every variable the program made, in order.
        self._training = training.Training()  # What the optimizers trained, held alive.
        # What the distributed datasets delivered, example by example.
        self._data = data.Deliveries(on_training_step=progress.stepped if progress else None)
        self._updates: set[tuple] = set()  # How each optimizer's gradients were reduced, each kind once.
        self._updating = threading.local()  # An update inside another (a base class's, an inner optimizer's).
        self._prune_at = PRUNE_AT
        self._strategies = 0
        self._checkpoints = 0
        self._inside = threading.local()  # A checkpoint written by another (async) one is recorded once.
        self._ended = False

    @guarded
    def tensorflow_module_imported(self, module) -> None:
        from . import patches

        patches.TENSORFLOW[module.__name__](module, self)

    @guarded
    def keras_imported(self, keras) -> None:
        from . import patches

        patches.observe_keras(keras, self)

    @guarded
    def strategy_made(self, strategy, described: dict) -> None:
        self._strategies += 1
        if self._strategies == 1:
            # Registered after TensorFlow's own exit handlers, so it runs before them (atexit is LIFO).
            atexit.register(self.program_ended)
        self.journal.write("strategy", **described)

    def variable_made(self, variable) -> None:
        self._variables.append(weakref.ref(variable))
        if len(self._variables) >= self._prune_at:  # A program that makes variables as it goes leaks no references.
            self._variables = [ref for ref in self._variables if ref() is not None]
            self._prune_at = max(PRUNE_AT, 2 * len(self._variables))

    def not_state(self, variable) -> None:
        """Leaves out a variable of TensorFlow's own machinery, made while the program's strategy was."""
        self._variables = [ref for ref in self._variables if ref() is not variable]

    @guarded
    def optimizer_seen(self, optimizer) -> None:
        self._training.seen(optimizer)

    @guarded
    def gradients_applied(self, optimizer, gradients, flags: dict) -> None:
        """Records once per kind how an optimizer's gradients were reduced (trainer/observer/updates.py)."""
        from . import updates

        found = updates.how_reduced(list(gradients or ()), flags)
        if found is None:
            return  # Constant gradients (zeros, to build the slots): no training step.
        key = (id(optimizer), *sorted(found.items()))
        self._training.applied(optimizer, found["gradient_bytes"])
        self._data.training_began()
        if not _eagerly():
            import tensorflow as tf

            self._data.trained_in(tf.compat.v1.get_default_graph())
        if key not in self._updates:
            self._updates.add(key)
            self.journal.write("update", optimizer=type(optimizer).__name__, **found)

    @guarded
    def delivered(self, values) -> None:
        self._data.delivered(values)

    def updating(self):
        """A context: true inside, for the outermost optimizer update only."""
        return _Outermost(self._updating)

    @guarded
    def optimizer_updated(self, optimizer, variables) -> None:
        self._training.updated(optimizer, variables, eagerly=_eagerly())

    @guarded
    def epoch_ended(self, model, epoch: int, logs) -> None:
        optimizer = getattr(model, "optimizer", None)
        metrics = {key: float(value) for key, value in (logs or {}).items() if _is_number(value)}
        self._data.epoch_ended()
        if self._progress is not None:
            self._progress.epoch_ended()
        self._record("epoch", epoch + 1, [*model.variables, *variables_of(optimizer)], optimizer, logs=metrics)

    @guarded
    def loop_epoch_ended(self) -> None:
        """A training loop's own epoch end (the package's `epoch_ended`): progress only, no record."""
        if self._progress is not None:
            self._progress.epoch_ended()

    @guarded
    def checkpoint_written(self, checkpoint) -> None:
        import tensorflow as tf

        objects = tf.train.TrackableView(checkpoint).descendants()
        optimizer = next((o for o in objects if hasattr(o, "apply_gradients") and hasattr(o, "iterations")), None)
        self._checkpoints += 1
        # A checkpoint of no optimizer (a model's weights alone) is placed by the trained optimizers' step.
        step = None if optimizer is not None else _largest_iterations(self._training.variables())
        self._record("checkpoint", self._checkpoints, objects, optimizer, step=step)

    @guarded
    def program_ended(self) -> None:
        if self._ended:
            return
        self._ended = True
        self.data_ended()  # Its own guard: the state below is recorded whatever happens to it.
        trained = self._training.variables()
        alive = [variable for variable in (ref() for ref in self._variables) if variable is not None] + trained
        optimizer = None  # The end has no optimizer of its own: its step is the largest `iterations`.
        steps = self._training.steps_taken()
        self._record(
            "end",
            1,
            alive,
            optimizer,
            step=_largest_iterations(alive),
            steps_run=max(steps.values(), default=None),
            reduced_bytes=self._training.reduced_bytes(steps),
            trained=trained,
        )

    @guarded
    def data_ended(self) -> None:
        for record in self._data.records(trained=bool(self._training.variables())):
            self.journal.write("data", **record)

    def writing_checkpoint(self):
        """A context: true inside, for the outermost checkpoint write only."""
        return _Outermost(self._inside)

    def _record(self, point: str, index: int, variables, optimizer, *, step=None, trained=None, **fields) -> None:
        """`trained`: the trained variables, where the caller has them already."""
        from . import fingerprint

        started = time.perf_counter()
        trained = self._training.variables() if trained is None else trained
        state = fingerprint.fingerprint(variables, trained=trained)
        if step is None and optimizer is not None:
            step = fingerprint.step(optimizer)
        seconds = round(time.perf_counter() - started, 6)
        self.journal.write("state", point=point, index=index, step=step, **state, **fields, seconds=seconds)


class _Outermost:
    def __init__(self, local):
        self._local = local
        self.outermost = False

    def __enter__(self):
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        self.outermost = depth == 0
        return self

    def __exit__(self, *_):
        self._local.depth -= 1


def _eagerly() -> bool:
    import tensorflow as tf

    return tf.executing_eagerly()


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _largest_iterations(variables) -> int | None:
    from . import fingerprint

    steps = [
        int(fingerprint.local_value(variable))
        for variable in fingerprint.unique(variables)  # TensorFlow's variables, behind Keras 3's own.
        if variable.name.split("/")[-1].split(":")[0] in ("iteration", "iterations", "iter")
        and variable.dtype.is_integer
    ]
    return max(steps, default=None)

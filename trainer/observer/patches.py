"""Where the observer hooks into TensorFlow and Keras: each wrapper calls the original, then records.

TensorFlow offers no hook for these events, so the observer wraps the methods behind them, the
way profilers and tracers do. Each wrapper returns what the original returned and raises what it
raised; the recording runs after the original, guarded (trainer/observer/points.py):
- `StrategyBase.__init__`: every strategy the program makes (MultiWorkerMirroredStrategy's
  `__init__` calls it once its cluster is resolved and its collectives are up);
- `ResourceVariable.__init__` and `DistributedVariable.__init__`: every variable, weakly, for
  the state at the program's end, whatever made it;
- `Checkpoint._write`: behind `Checkpoint.save` and `write`, `CheckpointManager.save`, and so
  Keras's `BackupAndRestore` and `ModelCheckpoint`;
- `Model.fit` of tf-keras and of Keras 3: one more callback, whose only method is `on_epoch_end`;
- each optimizer's `apply_gradients` (and Keras 3's `apply`), of Keras 3, of tf-keras (its legacy
  optimizers too) and of TensorFlow 1: which variables training updates, so that the observer holds
  them, and the optimizer, alive until it has fingerprinted them at the program's end. Under
  `tf.function` this runs once, when the step is traced, which is all it needs: the variables a
  traced step updates are the same at every step;
- `CollectiveReplicaLauncher.__init__`: its ordering token, a variable of TensorFlow's, not the
  program's state;
- `input_lib._create_per_replica`: every element a distributed dataset's iterator hands the
  replicas, for the data proof (trainer/observer/data.py).
"""

import contextlib
import functools
import inspect

MARK = "_tfcluster_observed"


def _strategies(module, observer) -> None:
    default = module._DefaultDistributionStrategy  # noqa: SLF001 - TF's own default, not the program's.

    def made(strategy, *_, **__):
        if not isinstance(strategy, default):
            observer.strategy_made(strategy, describe(strategy))

    _after(module.StrategyBase, "__init__", made)


def _variables(variable_class):
    return lambda module, observer: _after(
        getattr(module, variable_class), "__init__", lambda variable, *_, **__: observer.variable_made(variable)
    )


def _launchers(module, observer) -> None:
    # The ordering tokens of MultiWorkerMirroredStrategy's collective launchers are TensorFlow's, not state.
    _after(
        module.CollectiveReplicaLauncher,
        "__init__",
        lambda launcher, *_, **__: observer.not_state(getattr(launcher, "_ordering_token", None)),
    )


def _deliveries(module, observer) -> None:
    """What a distributed dataset's iterator hands the replicas, each element, however distributed
    (trainer/observer/data.py): called as TensorFlow's module calls it, by its global name."""
    original = module._create_per_replica  # noqa: SLF001

    @functools.wraps(original)
    def _create_per_replica(value_list, strategy):
        result = original(value_list, strategy)
        observer.delivered(value_list)
        return result

    module._create_per_replica = _create_per_replica  # noqa: SLF001


# What is wrapped in TensorFlow, each as soon as its own module has run, inside `import tensorflow`.
# Not once `tensorflow` itself has (its __init__ run by trainer/observer/imports.py's loader): measured,
# that alone cost each process about a third of a CPU-second, these hooks nothing measurable
# (docs/observer-benchmark.md).
TENSORFLOW = {
    "tensorflow.python.distribute.distribute_lib": _strategies,
    "tensorflow.python.ops.resource_variable_ops": _variables("BaseResourceVariable"),
    "tensorflow.python.distribute.values": _variables("DistributedVariable"),
    "tensorflow.python.distribute.cross_device_utils": _launchers,
    "tensorflow.python.checkpoint.checkpoint": lambda module, observer: _around_checkpoint_write(module, observer),
    "tensorflow.python.training.optimizer": lambda module, observer: _observe_optimizers(module.Optimizer, observer),
    "tensorflow.python.distribute.input_lib": _deliveries,
}  # fmt: skip


def observe_keras(keras, observer) -> None:
    """Keras 3 only with TensorFlow as its backend; tf-keras always is."""
    backend = getattr(keras, "backend", None)
    if hasattr(backend, "backend") and backend.backend() != "tensorflow":
        return
    _observe_optimizers(keras.optimizers.Optimizer, observer)
    legacy = getattr(getattr(keras.optimizers, "legacy", None), "Optimizer", None)  # tf-keras's OptimizerV2.
    if legacy is not None:
        _observe_optimizers(legacy, observer)
    model_class = keras.Model
    original = model_class.fit
    if getattr(original, MARK, False):
        return
    signature = inspect.signature(original)
    callback_class = type("TfclusterObserver", (keras.callbacks.Callback,), {"on_epoch_end": _on_epoch_end(observer)})

    @functools.wraps(original)
    def fit(self, *args, **kwargs):
        try:
            bound = signature.bind(self, *args, **kwargs)
            bound.arguments["callbacks"] = _with(bound.arguments.get("callbacks"), callback_class())
        except Exception:  # noqa: BLE001 - arguments fit itself will refuse: let it say so.
            return original(self, *args, **kwargs)
        return original(*bound.args, **bound.kwargs)

    setattr(fit, MARK, True)
    model_class.fit = fit


def _on_epoch_end(observer):
    def on_epoch_end(callback, epoch, logs=None):
        observer.epoch_ended(callback.model, epoch, logs)

    return on_epoch_end


def _with(callbacks, ours):
    if callbacks is None:
        return [ours]
    if hasattr(callbacks, "append") and not isinstance(callbacks, (list, tuple)):
        callbacks.append(ours)  # A CallbackList of the program's own.
        return callbacks
    return [*callbacks, ours]


def describe(strategy) -> dict:
    """The strategy as the program made it: its public name, replicas and the cluster it resolved."""
    import tensorflow as tf  # Whole by now: the program has made a strategy.

    public = next(
        (name for name in dir(tf.distribute) if getattr(tf.distribute, name) is type(strategy)), type(strategy).__name__
    )
    described = {"class": public, "replicas": int(strategy.num_replicas_in_sync)}
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is not None:
        spec = resolver.cluster_spec().as_dict()
        described["cluster"] = {
            job: list(tasks.values()) if isinstance(tasks, dict) else list(tasks) for job, tasks in spec.items()
        }
        described["task"] = {"type": resolver.task_type, "index": resolver.task_id}
    return described


def _around_checkpoint_write(module, observer) -> None:
    original = module.Checkpoint._write  # noqa: SLF001 - what save, write and the manager call.
    if getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def _write(self, *args, **kwargs):
        with observer.writing_checkpoint() as writing:
            path = original(self, *args, **kwargs)
        if writing.outermost:
            observer.checkpoint_written(self)
        return path

    setattr(_write, MARK, True)
    module.Checkpoint._write = _write  # noqa: SLF001


def _observe_optimizers(optimizer_class, observer) -> None:
    """Wraps the update methods wherever the class or its bases define them (a subclass may call its base's)."""
    for owner in optimizer_class.__mro__:
        for name, updated in (("apply_gradients", _pairs_updated), ("apply", _apply_updated)):
            if name in vars(owner):
                _around_update(owner, name, updated, observer)


def _around_update(owner, name: str, updated, observer) -> None:
    original = vars(owner)[name]
    if getattr(original, MARK, False) or not callable(original):
        return

    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
        # One update is recorded at its outermost call: tf-keras's `apply_gradients` calls its base's,
        # Keras 3's calls `apply`, a LossScaleOptimizer its inner optimizer's, without the caller's flags.
        with observer.updating() as update:
            if not update.outermost:
                return original(self, *args, **kwargs)
            observer.optimizer_seen(self)  # Its step before its first update: where this process took it up.
            try:
                args, kwargs, variables, gradients = updated(self, args, kwargs)
            except Exception:  # noqa: BLE001 - arguments the original will refuse: let it say so, unobserved.
                return original(self, *args, **kwargs)
            observer.gradients_applied(self, gradients, _flags(signature, self, args, kwargs))
            result = original(self, *args, **kwargs)
        with contextlib.suppress(Exception):  # Recorded by the observer's own guard, or not at all.
            observer.optimizer_updated(self, variables() if callable(variables) else variables)
        return result

    setattr(wrapper, MARK, True)
    setattr(owner, name, wrapper)


def _flags(signature, optimizer, args, kwargs) -> dict:
    """The aggregation flags of the call, however given (tf-keras takes `experimental_aggregate_gradients`
    in its `**kwargs`); none when the arguments do not bind (the original will say why)."""
    try:
        arguments = signature.bind(optimizer, *args, **kwargs).arguments
    except TypeError:
        return {}
    extra = next((v for k, v in arguments.items() if signature.parameters[k].kind is inspect.Parameter.VAR_KEYWORD), {})
    names = ("skip_gradients_aggregation", "experimental_aggregate_gradients")
    return {name: arguments.get(name, extra.get(name)) for name in names if name in arguments or name in extra}


def _pairs_updated(_optimizer, args, kwargs):
    """`apply_gradients(grads_and_vars, ...)`: the pairs made a list first, since a `zip` is read only once."""
    if args:
        pairs = _listed(args[0])
        args = (pairs, *args[1:])
    elif "grads_and_vars" in kwargs:
        pairs = kwargs["grads_and_vars"] = _listed(kwargs["grads_and_vars"])
    else:
        return args, kwargs, (), ()
    pairs = [pair for pair in pairs if isinstance(pair, (list, tuple)) and len(pair) == 2]
    return args, kwargs, [pair[1] for pair in pairs], [pair[0] for pair in pairs]


def _apply_updated(optimizer, args, kwargs):
    """Keras 3's `apply(grads, trainable_variables=None)`: without variables, those the optimizer was built with."""
    gradients = args[0] if args else kwargs.get("grads", ())
    given = args[1] if len(args) > 1 else kwargs.get("trainable_variables")
    if given is None:
        return args, kwargs, lambda: list(getattr(optimizer, "_trainable_variables", None) or ()), gradients
    given = _listed(given)
    if len(args) > 1:
        args = (args[0], given, *args[2:])
    else:
        kwargs["trainable_variables"] = given
    return args, kwargs, given, gradients


def _listed(values):
    return values if isinstance(values, (list, tuple)) else list(values)


def _after(owner, name: str, record) -> None:
    original = getattr(owner, name)
    if getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        with contextlib.suppress(Exception):  # Recorded by the observer's own guard, or not at all.
            record(self, *args, **kwargs)
        return result

    setattr(wrapper, MARK, True)
    setattr(owner, name, wrapper)

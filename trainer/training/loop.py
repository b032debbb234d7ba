"""The synchronized training loop, split as Orbit splits a runner: build, a step function, a short loop.

`build` (trainer/training/build.py) makes the strategy, the model's state, the checkpoint object
and the input pipeline, and agrees on the step to start at; `make_train_step`
(trainer/training/step.py) is one strategy.run per step, every replica's loss all-reduced; the
loop below begins each epoch, steps through it, ends it, and saves checkpoints. What the caller
wants done besides (printing each epoch, a fault a test injects) comes in as callbacks.

With a checkpoint store it saves the whole training state at every interval and, on start,
resumes from the newest complete checkpoint at the exact step: the weights, the optimizer's
moments and step count, the running epoch's metric and loss, the finished epochs' results, and
the data position (the input pipeline's order is fixed, so the step says where it was).
"""

import dataclasses
from collections.abc import Callable

import tensorflow as tf

from trainer.contract.cluster import Cluster
from trainer.contract.settings import TrainingSettings
from trainer.training.build import Run, build
from trainer.training.checkpoints import Store
from trainer.training.outcome import EpochResult, TrainingResult
from trainer.training.step import make_train_step


def _nothing(*_arguments) -> None:
    pass


@dataclasses.dataclass(frozen=True, kw_only=True)
class Callbacks:
    """What the caller has done at the loop's moments; none of it touches the training itself."""

    # After each step, with the number of steps done, before that step can end an epoch or be saved.
    on_step: Callable[[int], None] = _nothing
    # After each epoch the loop trains, with its result and the number of steps done.
    on_epoch: Callable[[EpochResult, int], None] = _nothing


def train(
    cluster: Cluster,
    settings: TrainingSettings,
    *,
    callbacks: Callbacks,
    say: Callable[[str], None],
    store: Store | None = None,
) -> TrainingResult:
    """Runs the whole training; TF_CONFIG must already describe `cluster` in the environment.

    Keras 3's `Model.fit` is broken under MultiWorkerMirroredStrategy (keras-team/keras#20585),
    so this is a custom loop, as in the tutorial.
    """
    run = build(cluster, settings, say=say, store=store)
    train_step = make_train_step(run.strategy, run.state, global_batch_size=run.global_batch_size)
    steps_per_epoch = settings.steps_per_epoch
    step = run.start_step
    done_epochs = step // steps_per_epoch
    epochs = run.progress.finished_epochs(done_epochs)
    for epoch in range(done_epochs + 1, settings.epochs + 1):
        total_loss = _begin_epoch(run, step, steps_per_epoch)
        while step < epoch * steps_per_epoch:
            total_loss += train_step(run.iterator)
            step += 1
            callbacks.on_step(step)
            if step % steps_per_epoch == 0:
                result = _end_epoch(run, epoch, total_loss, steps_per_epoch)
                epochs.append(result)
                callbacks.on_epoch(result, step)
            if store and step % settings.checkpoint_interval == 0 and step < settings.total_steps:
                _save(run, store, step, total_loss)

    return TrainingResult(
        worker=cluster.index,
        workers=cluster.size,
        replicas=int(run.strategy.num_replicas_in_sync),
        epochs=tuple(epochs),
        steps=step,
    )


def _begin_epoch(run: Run, step: int, steps_per_epoch: int):
    """The epoch's loss so far: nothing at its start, or what the checkpoint kept of it."""
    if step % steps_per_epoch == 0:
        run.state.accuracy.reset_state()
        return 0.0
    # Resumed within this epoch: its metric state came back with the checkpoint.
    return tf.constant(run.progress.epoch_loss_sum.numpy())


def _end_epoch(run: Run, epoch: int, total_loss, steps_per_epoch: int) -> EpochResult:
    result = EpochResult(
        epoch=epoch, loss=float(total_loss / steps_per_epoch), accuracy=float(run.state.accuracy.result())
    )
    run.progress.record_epoch(result)
    return result


def _save(run: Run, store: Store, step: int, total_loss) -> None:
    run.progress.step_done.assign(step)
    run.progress.epoch_loss_sum.assign(total_loss)
    store.save(step, run.checkpoint.write)

"""Everything a worker trains with, built once before the first step, in the one order that works.

The order is the one the training has always had, and it matters: determinism is on before
anything runs, the strategy exists before any variable (constructing it joins the cluster), the
seed is set before the model's weights are drawn, and the checkpoint is read before the input
pipeline is told how many batches to skip.
"""

import dataclasses
from collections.abc import Callable, Iterator

import tensorflow as tf

from trainer.contract.cluster import Cluster
from trainer.contract.settings import TrainingSettings
from trainer.training.checkpoints import Store
from trainer.training.data import make_dataset_fn
from trainer.training.model import TrainingState, build_state
from trainer.training.progress import Progress, checkpoint_of, new_progress
from trainer.training.resume import start_step


@dataclasses.dataclass(frozen=True, kw_only=True)
class Run:
    strategy: tf.distribute.Strategy
    state: TrainingState
    progress: Progress
    checkpoint: tf.train.Checkpoint
    global_batch_size: int
    start_step: int  # 0, or the step of the checkpoint every worker resumed from.
    dataset: tf.distribute.DistributedDataset  # Kept alive beside its iterator for the whole run.
    iterator: Iterator  # The distributed dataset's, at the batch of `start_step`.


def build(cluster: Cluster, settings: TrainingSettings, *, say: Callable[[str], None], store: Store | None) -> Run:
    """TF_CONFIG must already describe `cluster` in the environment."""
    # Bit-identical results run to run, which is what makes a resumed run comparable at all.
    tf.config.experimental.enable_op_determinism()
    global_batch_size = settings.global_batch_size(cluster.size)
    # Constructing the strategy starts this worker's collective runtime and joins the cluster.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    tf.keras.utils.set_random_seed(settings.seed)
    state = build_state(strategy, learning_rate=settings.learning_rate)
    # Each worker's own bookkeeping, identical everywhere: plain variables, outside the scope.
    progress = new_progress(settings.epochs)
    checkpoint = checkpoint_of(state, progress)
    step = start_step(strategy, checkpoint, store=store, say=say)
    dataset = strategy.distribute_datasets_from_function(
        make_dataset_fn(seed=settings.seed, global_batch_size=global_batch_size, skip_batches=step)
    )
    iterator = iter(dataset)
    return Run(
        strategy=strategy,
        state=state,
        progress=progress,
        checkpoint=checkpoint,
        global_batch_size=global_batch_size,
        start_step=step,
        dataset=dataset,
        iterator=iterator,
    )

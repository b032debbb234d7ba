"""Entry point of one worker: `python -m trainer.training`.

Configuration is read here, once, and validated before TensorFlow is imported; everything inward
takes plain values. Exit codes are those of trainer.contract.exitcodes (docs/exit-codes.md).
"""

import json
import os
import sys
from pathlib import Path

from trainer.contract import cluster as cluster_config
from trainer.contract import gate
from trainer.contract.console import show
from trainer.contract.exitcodes import ExitCode
from trainer.contract.settings import RecoverySettings, TrainingSettings
from trainer.training.checkpoints import CheckpointDidNotFit, Store
from trainer.training.failure import check_failed, configuration_failed, volume_full
from trainer.training.faults import step_faults
from trainer.training.outcome import TrainingCheckFailed, check
from trainer.training.output import epoch_line, final_json, final_line


def say(line: str) -> None:
    show(line + "\n")


def main() -> int:
    try:
        cluster = cluster_config.from_env(os.environ)
        settings = TrainingSettings.from_env(os.environ)
        recovery = RecoverySettings.from_env(os.environ)
    except ValueError as error:
        return configuration_failed(str(error))

    store = None
    if recovery.checkpoint_dir:
        try:
            store = Store(
                Path(recovery.checkpoint_dir),
                is_chief=cluster.index == 0,
                say=say,
                commit_delay=recovery.fault_commit_delay,
            )
        except OSError as error:
            return configuration_failed(f"`TF_CHECKPOINT_DIR` ({recovery.checkpoint_dir}): {error}")

    cluster_config.export_for_tensorflow(cluster, os.environ)
    say(f"worker {cluster.index} of {cluster.size} | {cluster.address} | cluster: {json.dumps(list(cluster.workers))}")

    # These import TensorFlow: seconds, so after validation.
    from trainer.training.loop import Callbacks, train
    from trainer.training.resume import ResumeMismatch

    if not gate.wait_for_go():  # The launcher's rendezvous failed while TensorFlow was importing.
        return ExitCode.TERMINATED

    # The image's observer, for faults timed by epoch (None outside the image: nothing to tell).
    observer = sys.modules.get("_tfcluster_observer")

    def on_epoch(epoch, step):
        say(epoch_line(epoch, epochs=settings.epochs, step=step))
        if observer is not None:
            observer.epoch_ended()

    # Only a test asks for a fault (docs/recovery.md, docs/failures.md).
    faults = step_faults(exit_at=recovery.fault_exit_at_step, hang_at=recovery.fault_hang_at_step, say=say)
    callbacks = Callbacks(on_epoch=on_epoch, **({"on_step": faults} if faults else {}))
    try:
        result = train(cluster, settings, callbacks=callbacks, say=say, store=store)
    except ResumeMismatch as error:
        return configuration_failed(str(error))
    except CheckpointDidNotFit as error:
        return volume_full(str(error))
    try:
        check(result, min_accuracy=settings.min_accuracy)
    except TrainingCheckFailed as failure:
        return check_failed(str(failure))
    say(final_line(result))
    say(final_json(result))
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())

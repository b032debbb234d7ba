"""What a worker prints: where it starts, one line per epoch while training, then its final metrics twice.

The final metrics come as the tutorial's `key=value` line (for people, and so the tutorial's own
program and this one are verified alike) and as one JSON line with full precision (for programs).
Where it starts and why it failed, if it did, are JSON events too, each beside its line for
people: the verifier reads the events (trainer/verifier/events.py), never the prose.
"""

import json

from trainer.training.outcome import EpochResult, TrainingResult


def epoch_line(epoch: EpochResult, *, epochs: int, step: int) -> str:
    return (
        f"train | epoch: {epoch.epoch:>3}/{epochs:<3} | step: {step:>6} "
        f"| loss: {epoch.loss:.4f} | accuracy: {epoch.accuracy:.4f}"
    )


def final_line(result: TrainingResult) -> str:
    return (
        f"worker={result.worker} replicas={result.replicas} "
        f"initial_loss={result.initial_loss:.4f} "
        f"final_loss={result.final_loss:.4f} "
        f"final_accuracy={result.final_accuracy:.4f}"
    )


def final_json(result: TrainingResult) -> str:
    return json.dumps(
        {
            "event": "final",
            "worker": result.worker,
            "workers": result.workers,
            "replicas": result.replicas,
            "epochs": len(result.epochs),
            "steps": result.steps,
            "initial_loss": result.initial_loss,
            "final_loss": result.final_loss,
            "final_accuracy": result.final_accuracy,
        }
    )


def start_json(step: int) -> str:
    """Where this run of the trainer starts: 0 from scratch, or the checkpoint's step it resumed from."""
    return json.dumps({"event": "start", "step": step})

"""What a training run produced, and the tutorial's checks on it (no TensorFlow needed here)."""

import dataclasses


@dataclasses.dataclass(frozen=True, kw_only=True)
class EpochResult:
    epoch: int
    loss: float
    accuracy: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingResult:
    worker: int
    workers: int
    replicas: int
    epochs: tuple[EpochResult, ...]
    steps: int

    @property
    def initial_loss(self) -> float:
        return self.epochs[0].loss

    @property
    def final_loss(self) -> float:
        return self.epochs[-1].loss

    @property
    def final_accuracy(self) -> float:
        return self.epochs[-1].accuracy


class TrainingCheckFailed(Exception):
    """A synchronized run finished but its result fails one of the tutorial's checks."""


def check(result: TrainingResult, *, min_accuracy: float) -> None:
    """The tutorial's fail-capable checks: all replicas joined, the loss fell, accuracy passed."""
    failures = []
    if result.replicas != result.workers:
        failures.append(f"replicas ({result.replicas}) differ from the worker count ({result.workers})")
    if len(result.epochs) > 1 and not result.final_loss < result.initial_loss:
        failures.append(f"final_loss ({result.final_loss:.4f}) is not below initial_loss ({result.initial_loss:.4f})")
    if not result.final_accuracy > min_accuracy:
        failures.append(f"final_accuracy ({result.final_accuracy:.4f}) is not above {min_accuracy}")
    if failures:
        raise TrainingCheckFailed("; ".join(failures))

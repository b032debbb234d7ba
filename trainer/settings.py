"""Training settings: read once from the environment, validated, then passed inward as a value."""

import dataclasses
import math
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingSettings:
    """The tutorial's training, with its figures as defaults."""

    epochs: int = 3
    steps_per_epoch: int = 4
    per_worker_batch_size: int = 16
    learning_rate: float = 0.03
    seed: int = 7
    # The tutorial's pass mark for the final epoch's accuracy.
    min_accuracy: float = 0.75

    def __post_init__(self):
        for name in ("epochs", "steps_per_epoch", "per_worker_batch_size"):
            value = getattr(self, name)
            if not 1 <= value <= 1_000_000:
                raise ValueError(f"`{_ENV_NAMES[name]}` ({value}) must be in [1, 1000000]")
        if not 0 <= self.seed < 2**31:
            raise ValueError(f"`TRAIN_SEED` ({self.seed}) must be in [0, 2147483648)")
        if not (math.isfinite(self.learning_rate) and 0 < self.learning_rate <= 10):
            raise ValueError(f"`TRAIN_LEARNING_RATE` ({self.learning_rate}) must be in (0, 10]")
        if not (math.isfinite(self.min_accuracy) and 0 <= self.min_accuracy < 1):
            raise ValueError(f"`TRAIN_MIN_ACCURACY` ({self.min_accuracy}) must be in [0, 1)")

    @property
    def total_steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    def global_batch_size(self, worker_count: int) -> int:
        return self.per_worker_batch_size * worker_count

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "TrainingSettings":
        values = {}
        for field in dataclasses.fields(cls):
            name = _ENV_NAMES[field.name]
            text = environ.get(name, "").strip()
            if text:
                values[field.name] = _parse(name, text, field.type)
        return cls(**values)


_ENV_NAMES = {
    "epochs": "TRAIN_EPOCHS",
    "steps_per_epoch": "TRAIN_STEPS_PER_EPOCH",
    "per_worker_batch_size": "TRAIN_BATCH_SIZE",
    "learning_rate": "TRAIN_LEARNING_RATE",
    "seed": "TRAIN_SEED",
    "min_accuracy": "TRAIN_MIN_ACCURACY",
}


def _parse(name: str, text: str, kind) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        article = "an integer" if kind is int else "a number"
        raise ValueError(f"`{name}` ({text!r}) must be {article}") from None
    return value

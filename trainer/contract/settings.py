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
    # Checkpoint every this many steps; 0 means at the end of every epoch (trainer/training/checkpoints.py).
    checkpoint_steps: int = 0
    # The tutorial's pass mark for the final epoch's accuracy.
    min_accuracy: float = 0.75

    def __post_init__(self):
        for name in ("epochs", "steps_per_epoch", "per_worker_batch_size"):
            value = getattr(self, name)
            if not 1 <= value <= 1_000_000:
                raise ValueError(f"`{ENV_NAMES[name]}` ({value}) must be in [1, 1000000]")
        if not 0 <= self.checkpoint_steps <= 1_000_000:
            raise ValueError(f"`TRAIN_CHECKPOINT_STEPS` ({self.checkpoint_steps}) must be in [0, 1000000]")
        if not 0 <= self.seed < 2**31:
            raise ValueError(f"`TRAIN_SEED` ({self.seed}) must be in [0, 2147483648)")
        if not (math.isfinite(self.learning_rate) and 0 < self.learning_rate <= 10):
            raise ValueError(f"`TRAIN_LEARNING_RATE` ({self.learning_rate}) must be in (0, 10]")
        if not (math.isfinite(self.min_accuracy) and 0 <= self.min_accuracy < 1):
            raise ValueError(f"`TRAIN_MIN_ACCURACY` ({self.min_accuracy}) must be in [0, 1)")

    @property
    def total_steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    @property
    def checkpoint_interval(self) -> int:
        return self.checkpoint_steps or self.steps_per_epoch

    def global_batch_size(self, worker_count: int) -> int:
        return self.per_worker_batch_size * worker_count

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "TrainingSettings":
        values = {}
        for field in dataclasses.fields(cls):
            name = ENV_NAMES[field.name]
            text = environ.get(name, "").strip()
            if text:
                values[field.name] = _parse(name, text, field.type)
        return cls(**values)


# The environment variable of each training setting.
ENV_NAMES = {
    "epochs": "TRAIN_EPOCHS",
    "steps_per_epoch": "TRAIN_STEPS_PER_EPOCH",
    "per_worker_batch_size": "TRAIN_BATCH_SIZE",
    "learning_rate": "TRAIN_LEARNING_RATE",
    "seed": "TRAIN_SEED",
    "checkpoint_steps": "TRAIN_CHECKPOINT_STEPS",
    "min_accuracy": "TRAIN_MIN_ACCURACY",
}


def _parse(name: str, text: str, kind) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        article = "an integer" if kind is int else "a number"
        raise ValueError(f"`{name}` ({text!r}) must be {article}") from None
    return value


def _given(environ: Mapping[str, str], *fields: tuple[str, str, type]) -> dict:
    """The (field, variable, type) settings the environment sets, parsed; unset ones are left out."""
    values = {}
    for field, name, kind in fields:
        text = environ.get(name, "").strip()
        if text:
            values[field] = _parse(name, text, kind)
    return values


@dataclasses.dataclass(frozen=True, kw_only=True)
class LaunchSettings:
    """How the launcher bounds a worker's life (docs/settings.md, "Deadlines")."""

    join_timeout: float = 60.0
    run_timeout: float = 3600.0
    rendezvous_port: int = 12399
    results_dir: str = ""

    def __post_init__(self):
        if not (math.isfinite(self.join_timeout) and 0 < self.join_timeout <= 86_400):
            raise ValueError(f"`TF_JOIN_TIMEOUT` ({self.join_timeout}) must be in (0, 86400] seconds")
        if not (math.isfinite(self.run_timeout) and 0 < self.run_timeout <= 604_800):
            raise ValueError(f"`TF_RUN_TIMEOUT` ({self.run_timeout}) must be in (0, 604800] seconds")
        if not 1 <= self.rendezvous_port <= 65535:
            raise ValueError(f"`TF_RENDEZVOUS_PORT` ({self.rendezvous_port}) must be in [1, 65535]")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "LaunchSettings":
        values = _given(
            environ,
            ("join_timeout", "TF_JOIN_TIMEOUT", float),
            ("run_timeout", "TF_RUN_TIMEOUT", float),
            ("rendezvous_port", "TF_RENDEZVOUS_PORT", int),
        )
        return cls(results_dir=environ.get("TF_RESULTS_DIR", "").strip(), **values)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecoverySettings:
    """Where the chief keeps checkpoints (empty: none), and the faults tests inject on purpose.

    The faults are for testing the recovery path (docs/failures.md, "Recovery"): the program
    exits 1 right after the given step, or the chief waits this long between writing a checkpoint
    and committing it, so that a kill can land in the middle of a save.
    """

    checkpoint_dir: str = ""
    fault_exit_at_step: int = 0
    fault_commit_delay: float = 0.0

    def __post_init__(self):
        if self.fault_exit_at_step < 0:
            raise ValueError(f"`TFCLUSTER_FAULT_EXIT_AT_STEP` ({self.fault_exit_at_step}) must not be negative")
        if not (math.isfinite(self.fault_commit_delay) and 0 <= self.fault_commit_delay <= 3600):
            raise ValueError(f"`TFCLUSTER_FAULT_COMMIT_DELAY` ({self.fault_commit_delay}) must be in [0, 3600] seconds")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "RecoverySettings":
        values = _given(
            environ,
            ("fault_exit_at_step", "TFCLUSTER_FAULT_EXIT_AT_STEP", int),
            ("fault_commit_delay", "TFCLUSTER_FAULT_COMMIT_DELAY", float),
        )
        return cls(checkpoint_dir=environ.get("TF_CHECKPOINT_DIR", "").strip(), **values)


def restart_limit(environ: Mapping[str, str]) -> int:
    """TF_RESTART_LIMIT: how many times the keeper (trainer/keeper/keeper.py) restarts the whole cluster."""
    text = environ.get("TF_RESTART_LIMIT", "").strip() or "3"
    limit = _parse("TF_RESTART_LIMIT", text, int)
    if not 0 <= limit <= 100:
        raise ValueError(f"`TF_RESTART_LIMIT` ({limit}) must be in [0, 100]")
    return limit

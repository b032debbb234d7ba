"""The settings: config.yaml beside the project, two of them overridable from the environment."""

import dataclasses
import os
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Config:
    epochs: int
    steps_per_epoch: int
    per_worker_batch_size: int
    learning_rate: float
    seed: int
    min_accuracy: float


def load(path: Path = PROJECT / "config.yaml") -> Config:
    values = yaml.safe_load(path.read_text())
    for name in ("epochs", "steps_per_epoch"):
        text = os.environ.get(f"FIT_{name.upper()}", "").strip()
        if text:
            values[name] = int(text)
    return Config(**values)

"""Settings: read once from the environment, validated, then passed inward as a value.

Every role declares its settings the same way: a frozen, keyword-only dataclass derived from
`Settings`, whose fields are `setting`s naming their environment variable, how to read it and
the range it must be in:

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class KeeperSettings(Settings):
        restart_limit: int = setting(env="TF_RESTART_LIMIT", kind=int, at_least=0, at_most=100, default=3)

`KeeperSettings.from_env(os.environ)` reads and checks every field; constructing one directly
checks the same ranges. A bad value is one ValueError naming the variable and quoting the value,
e.g. "`TRAIN_SEED` (-1) must be in [0, 2147483648)".
"""

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

from trainer.contract import zygote
from trainer.contract.faults import VARIABLE as FAULTS

_METADATA_KEY = "setting"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Setting:
    """How one field is read from its environment variable, and what it may be."""

    env: str
    # Turns the variable's (stripped, non-empty) text into the value; a ValueError means the text is no value at all.
    kind: Callable[[str], Any] = str
    at_least: float | None = None
    greater_than: float | None = None
    at_most: float | None = None
    less_than: float | None = None
    choices: tuple[str, ...] = ()
    # Follows the range in messages ("must be in (0, 86400] seconds").
    unit: str = ""
    # How messages show an out-of-range value: the format spec of `format(value, value_format)`.
    value_format: str = ""

    def parse(self, text: str) -> Any:
        """The value of the variable's (stripped, non-empty) text; its range is `check`'s."""
        try:
            value = self.kind(text)
        except ValueError:
            article = "an integer" if self.kind is int else "a number"
            raise ValueError(f"`{self.env}` ({text!r}) must be {article}") from None
        self._check_choice(value)
        return value

    def check(self, value: Any) -> None:
        """Raises ValueError if `value` is not one this setting allows; None (left unset) always is."""
        if value is None:
            return
        self._check_choice(value)
        if not self._in_range(value):
            requirement = self._requirement()
            if self.unit:
                requirement = f"{requirement} {self.unit}"
            raise ValueError(f"`{self.env}` ({format(value, self.value_format)}) must {requirement}")

    def _check_choice(self, value: Any) -> None:
        if self.choices and value not in self.choices:
            raise ValueError(f"`{self.env}` ({value!r}) must be one of {', '.join(self.choices)}")

    def _in_range(self, value: Any) -> bool:
        bounds = (self.at_least, self.greater_than, self.at_most, self.less_than)
        if all(bound is None for bound in bounds):
            return True
        # NaN compares false with everything, and infinity is no setting's value.
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return (
            (self.at_least is None or value >= self.at_least)
            and (self.greater_than is None or value > self.greater_than)
            and (self.at_most is None or value <= self.at_most)
            and (self.less_than is None or value < self.less_than)
        )

    def _requirement(self) -> str:
        """What `_in_range` asks, in the words of the messages: "be in [0, 1)", "not be negative"."""
        opening, low = ("[", self.at_least) if self.at_least is not None else ("(", self.greater_than)
        high, closing = (self.at_most, "]") if self.at_most is not None else (self.less_than, ")")
        if low is not None and high is not None:
            return f"be in {opening}{low}, {high}{closing}"
        if low is not None:
            if opening == "[":
                return "not be negative" if low == 0 else f"be at least {low}"
            return f"be more than {low}"
        return f"be at most {high}" if closing == "]" else f"be less than {high}"


def setting(
    *,
    env: str,
    default: Any,
    kind: Callable[[str], Any] = str,
    at_least: float | None = None,
    greater_than: float | None = None,
    at_most: float | None = None,
    less_than: float | None = None,
    choices: Collection[str] = (),
    unit: str = "",
    value_format: str = "",
) -> Any:
    """A dataclass field read from `env`: inclusive bounds `at_least`/`at_most`, exclusive ones
    `greater_than`/`less_than`; `default` when the variable is unset or blank."""
    if at_least is not None and greater_than is not None:
        raise ValueError(f"`{env}` takes one lower bound, not at_least={at_least} and greater_than={greater_than}")
    if at_most is not None and less_than is not None:
        raise ValueError(f"`{env}` takes one upper bound, not at_most={at_most} and less_than={less_than}")
    spec = Setting(
        env=env,
        kind=kind,
        at_least=at_least,
        greater_than=greater_than,
        at_most=at_most,
        less_than=less_than,
        choices=tuple(choices),
        unit=unit,
        value_format=value_format,
    )
    return dataclasses.field(default=default, metadata={_METADATA_KEY: spec})


def _settings_of(cls) -> list[tuple[dataclasses.Field, Setting]]:
    """The fields of a settings dataclass that are `setting`s, in declaration order (others are derived)."""
    fields = dataclasses.fields(cls)
    return [(field, field.metadata[_METADATA_KEY]) for field in fields if _METADATA_KEY in field.metadata]


class Settings:
    """The base of every settings dataclass: checks its fields when made, reads them from the environment."""

    def __post_init__(self):
        for field, spec in _settings_of(self):
            spec.check(getattr(self, field.name))

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, only: Collection[str] | None = None) -> "Settings":
        """The settings `environ` gives, the defaults for the rest; with `only`, just those fields are read.

        Every variable is read before any range is checked, so text that is no value at all (or no
        choice) is named first; then the first field out of range, in declaration order.
        """
        values = {}
        for field, spec in _settings_of(cls):
            if only is not None and field.name not in only:
                continue
            text = environ.get(spec.env, "").strip()
            if text:
                values[field.name] = spec.parse(text)
        return cls(**values)

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Each setting's field name and its environment variable, in declaration order."""
        return {field.name: spec.env for field, spec in _settings_of(cls)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingSettings(Settings):
    """The tutorial's training, with its figures as defaults."""

    epochs: int = setting(env="TRAIN_EPOCHS", kind=int, at_least=1, at_most=1_000_000, default=3)
    steps_per_epoch: int = setting(env="TRAIN_STEPS_PER_EPOCH", kind=int, at_least=1, at_most=1_000_000, default=4)
    per_worker_batch_size: int = setting(env="TRAIN_BATCH_SIZE", kind=int, at_least=1, at_most=1_000_000, default=16)
    learning_rate: float = setting(env="TRAIN_LEARNING_RATE", kind=float, greater_than=0, at_most=10, default=0.03)
    seed: int = setting(env="TRAIN_SEED", kind=int, at_least=0, less_than=2**31, default=7)
    # Checkpoint every this many steps; 0 means at the end of every epoch (trainer/training/checkpoints.py).
    checkpoint_steps: int = setting(env="TRAIN_CHECKPOINT_STEPS", kind=int, at_least=0, at_most=1_000_000, default=0)
    # The tutorial's pass mark for the final epoch's accuracy.
    min_accuracy: float = setting(env="TRAIN_MIN_ACCURACY", kind=float, at_least=0, less_than=1, default=0.75)

    @property
    def total_steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    @property
    def checkpoint_interval(self) -> int:
        return self.checkpoint_steps or self.steps_per_epoch

    def global_batch_size(self, worker_count: int) -> int:
        return self.per_worker_batch_size * worker_count


# The environment variable of each training setting (the rendezvous names differing settings by it).
ENV_NAMES = TrainingSettings.env_names()


def _comma_separated(text: str) -> tuple[str, ...]:
    """The names in a comma-separated list, each once, in order; blanks between commas are no name."""
    return tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))


@dataclasses.dataclass(frozen=True, kw_only=True)
class LaunchSettings(Settings):
    """How the launcher bounds a worker's life (docs/settings.md, "Deadlines"), and what it is told to expect."""

    join_timeout: float = setting(
        env="TF_JOIN_TIMEOUT", kind=float, greater_than=0, at_most=86_400, unit="seconds", default=60.0
    )
    run_timeout: float = setting(
        env="TF_RUN_TIMEOUT", kind=float, greater_than=0, at_most=604_800, unit="seconds", default=3600.0
    )
    rendezvous_port: int = setting(env="TF_RENDEZVOUS_PORT", kind=int, at_least=1, at_most=65535, default=12399)
    # Empty: no results directory, so nothing recorded for a verifier.
    results_dir: str = setting(env="TF_RESULTS_DIR", default="")
    # Empty: no shaper beside the worker. The shaper (trainer/shaper/) knows the profiles and checks the name.
    network_profile: str = setting(env="TF_NETWORK_PROFILE", default="")
    # How long a stopped program (a signal, a lost peer, the run deadline) may take to end before it
    # gets SIGKILL: time for TensorFlow's PreemptionCheckpointHandler to save, say. Docker kills the
    # launcher itself at Compose's `stop_grace_period` (10 s unless set), so that must be longer.
    stop_grace: float = setting(
        env="TF_STOP_GRACE", kind=float, greater_than=0, at_most=3600, unit="seconds", default=2.0
    )
    # How long every worker's program may make no progress (no CPU used, no line printed) before the
    # cluster counts as stalled: each worker dumps its program's stack and stops (docs/failures.md, "Stalls").
    stall_timeout: float = setting(
        env="TF_STALL_TIMEOUT", kind=float, greater_than=0, at_most=604_800, unit="seconds", default=300.0
    )
    # The user's own settings (scripts/run --env, --env-file), comma-separated names: the rendezvous
    # compares their values on every worker, as it does the TRAIN_* settings.
    user_variables: tuple[str, ...] = setting(env="TFCLUSTER_USER_ENV", kind=_comma_separated, default=())
    # Empty: no project of the user's. Else where it is mounted (read-only): the rendezvous compares
    # a digest of its files on every worker (trainer/launcher/digests.py).
    project_dir: str = setting(env="TFCLUSTER_PROJECT_DIR", default="")
    # 1: the rendezvous compares a digest of the training command (and of the files it names) on
    # every worker. 0: the workers run different programs on purpose (the tests' stand-in programs);
    # a worker with 0 still differs from one with 1, so none opts out alone.
    compare_command: str = setting(env="TFCLUSTER_COMPARE_COMMAND", choices=("0", "1"), default="1")
    # 1: the program runs with TF_CPP_MIN_LOG_LEVEL=0 and TensorFlow's C++ start-up notices are
    # shown; 0: they are kept out of the worker's output (trainer/launcher/noise.py).
    startup_logs: int = setting(env="TF_STARTUP_LOGS", kind=int, at_least=0, at_most=1, default=0)
    # 1: a warm run (scripts/run --warm): the worker's zygote forks the program (trainer/zygote/),
    # and the launcher clears what earlier runs left in the results and checkpoint folders' parents.
    warm: str = setting(env="TFCLUSTER_WARM", choices=("0", "1"), default="0")
    # Where a warm worker's zygote listens (trainer/contract/zygote.py).
    zygote_socket: str = setting(env=zygote.SOCKET_VARIABLE, default=zygote.SOCKET)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecoverySettings(Settings):
    """Where the chief keeps checkpoints (empty: none), and the faults tests inject on purpose.

    The faults are for testing the recovery path (docs/failures.md, "Recovery"): the program
    exits 1 right after the given step, or the chief waits this long between writing a checkpoint
    and committing it, so that a kill can land in the middle of a save; and the stall watchdog:
    the program stops calling collectives after the given step (docs/failures.md, "Stalls").
    """

    # Compared at the rendezvous (the chief's saves and every worker's restore are collectives);
    # the faults below are not: each is injected into one worker on purpose.
    checkpoint_dir: str = setting(env="TF_CHECKPOINT_DIR", default="")
    fault_exit_at_step: int = setting(env="TFCLUSTER_FAULT_EXIT_AT_STEP", kind=int, at_least=0, default=0)
    fault_hang_at_step: int = setting(env="TFCLUSTER_FAULT_HANG_AT_STEP", kind=int, at_least=0, default=0)
    fault_commit_delay: float = setting(
        env="TFCLUSTER_FAULT_COMMIT_DELAY", kind=float, at_least=0, at_most=3600, unit="seconds", default=0.0
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class KeeperSettings(Settings):
    """How many times the keeper (trainer/keeper/keeper.py) restarts the whole cluster, and where it records it."""

    restart_limit: int = setting(env="TF_RESTART_LIMIT", kind=int, at_least=0, at_most=100, default=3)
    # Empty: no results directory, so nothing recorded for a verifier.
    results_dir: str = setting(env="TF_RESULTS_DIR", default="")


@dataclasses.dataclass(frozen=True, kw_only=True)
class VerifierSettings(Settings):
    """What the verifier is told of the program's intent (docs/verifier.md, "What each worker read").

    `sharded`: every worker trains on examples of its own, and an overlap fails the run;
    `replicated`: the program means every worker to read the same examples (the data proof then
    says what was shared, and fails nothing for it).
    """

    data_sharding: str = setting(env="TF_DATA_SHARDING", choices=("sharded", "replicated"), default="sharded")
    # The network faults the run asked for (scripts/run --fault, compose.network.yaml): each must be
    # in a shaper's record, injected or never reached, or the run did not test it.
    faults_text: str = setting(env=FAULTS, default="")

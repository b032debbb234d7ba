import dataclasses

import pytest

from trainer.contract.settings import (
    ENV_NAMES,
    KeeperSettings,
    LaunchSettings,
    RecoverySettings,
    Settings,
    TrainingSettings,
    VerifierSettings,
    setting,
)


def test_defaults_are_the_tutorials():
    settings = TrainingSettings.from_env({})
    assert (settings.epochs, settings.steps_per_epoch, settings.per_worker_batch_size) == (3, 4, 16)
    assert (settings.learning_rate, settings.seed, settings.min_accuracy) == (0.03, 7, 0.75)
    assert settings.total_steps == 12
    assert settings.global_batch_size(2) == 32


def test_every_setting_is_read():
    settings = TrainingSettings.from_env(
        {
            "TRAIN_EPOCHS": "5",
            "TRAIN_STEPS_PER_EPOCH": "2",
            "TRAIN_BATCH_SIZE": "8",
            "TRAIN_LEARNING_RATE": "0.1",
            "TRAIN_SEED": "42",
            "TRAIN_MIN_ACCURACY": "0.5",
        }
    )
    assert settings == TrainingSettings(
        epochs=5, steps_per_epoch=2, per_worker_batch_size=8, learning_rate=0.1, seed=42, min_accuracy=0.5
    )


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"TRAIN_EPOCHS": "three"}, "`TRAIN_EPOCHS` ('three') must be an integer"),
        ({"TRAIN_EPOCHS": "0"}, "`TRAIN_EPOCHS` (0) must be in [1, 1000000]"),
        ({"TRAIN_STEPS_PER_EPOCH": "2.5"}, "`TRAIN_STEPS_PER_EPOCH` ('2.5') must be an integer"),
        ({"TRAIN_BATCH_SIZE": "-16"}, "`TRAIN_BATCH_SIZE` (-16)"),
        ({"TRAIN_LEARNING_RATE": "fast"}, "`TRAIN_LEARNING_RATE` ('fast') must be a number"),
        ({"TRAIN_LEARNING_RATE": "0"}, "`TRAIN_LEARNING_RATE` (0.0) must be in (0, 10]"),
        ({"TRAIN_LEARNING_RATE": "nan"}, "`TRAIN_LEARNING_RATE` (nan)"),
        ({"TRAIN_SEED": "-1"}, "`TRAIN_SEED` (-1)"),
        ({"TRAIN_MIN_ACCURACY": "1.5"}, "`TRAIN_MIN_ACCURACY` (1.5)"),
    ],
)
def test_bad_settings_name_the_bad_value(environ, named):
    with pytest.raises(ValueError, match=None) as raised:
        TrainingSettings.from_env(environ)
    assert named in str(raised.value)


def test_settings_made_directly_are_held_to_the_same_ranges():
    with pytest.raises(ValueError, match=r"^`TRAIN_SEED` \(-1\) must be in \[0, 2147483648\)$"):
        TrainingSettings(seed=-1)
    with pytest.raises(ValueError, match=r"^`TF_RESTART_LIMIT` \(101\) must be in \[0, 100\]$"):
        KeeperSettings(restart_limit=101)


def test_the_environment_names_of_the_training_settings_come_from_their_declarations():
    # The rendezvous (trainer/launcher/rendezvous.py) names differing settings by them.
    assert ENV_NAMES == {
        "epochs": "TRAIN_EPOCHS",
        "steps_per_epoch": "TRAIN_STEPS_PER_EPOCH",
        "per_worker_batch_size": "TRAIN_BATCH_SIZE",
        "learning_rate": "TRAIN_LEARNING_RATE",
        "seed": "TRAIN_SEED",
        "checkpoint_steps": "TRAIN_CHECKPOINT_STEPS",
        "min_accuracy": "TRAIN_MIN_ACCURACY",
    }


def test_the_launch_settings_read_the_deadlines_the_port_the_results_and_the_network_profile():
    assert LaunchSettings.from_env({}) == LaunchSettings(
        join_timeout=60.0, run_timeout=3600.0, rendezvous_port=12399, results_dir="", network_profile=""
    )
    launch = LaunchSettings.from_env(
        {
            "TF_JOIN_TIMEOUT": "5",
            "TF_RUN_TIMEOUT": "600",
            "TF_RENDEZVOUS_PORT": "13000",
            "TF_RESULTS_DIR": " /results ",
            "TF_NETWORK_PROFILE": "wan",
        }
    )
    assert (launch.join_timeout, launch.run_timeout, launch.rendezvous_port) == (5.0, 600.0, 13000)
    assert (launch.results_dir, launch.network_profile) == ("/results", "wan")


def test_the_launch_settings_read_the_stop_grace_the_users_settings_and_the_project():
    launch = LaunchSettings.from_env({})
    assert (launch.stop_grace, launch.user_variables, launch.project_dir) == (2.0, (), "")
    launch = LaunchSettings.from_env(
        {
            "TF_STOP_GRACE": "8.5",
            "TFCLUSTER_USER_ENV": " LEARNING_RATE, ,OPTIMIZER,LEARNING_RATE,",
            "TFCLUSTER_PROJECT_DIR": "/project",
        }
    )
    assert (launch.stop_grace, launch.project_dir) == (8.5, "/project")
    assert launch.user_variables == ("LEARNING_RATE", "OPTIMIZER")  # Each once, in order, blanks dropped.


def test_the_keeper_and_recovery_settings_have_their_defaults():
    assert KeeperSettings.from_env({}) == KeeperSettings(restart_limit=3, results_dir="")
    assert KeeperSettings.from_env({"TF_RESTART_LIMIT": "0", "TF_RESULTS_DIR": "/results"}).restart_limit == 0
    assert RecoverySettings.from_env({}) == RecoverySettings(checkpoint_dir="", fault_exit_at_step=0)
    recovery = RecoverySettings.from_env({"TF_CHECKPOINT_DIR": "/checkpoints", "TFCLUSTER_FAULT_COMMIT_DELAY": "2"})
    assert (recovery.checkpoint_dir, recovery.fault_commit_delay) == ("/checkpoints", 2.0)


@pytest.mark.parametrize(
    ("settings", "environ", "message"),
    [
        (LaunchSettings, {"TF_JOIN_TIMEOUT": "soon"}, "`TF_JOIN_TIMEOUT` ('soon') must be a number"),
        (LaunchSettings, {"TF_JOIN_TIMEOUT": "0"}, "`TF_JOIN_TIMEOUT` (0.0) must be in (0, 86400] seconds"),
        (LaunchSettings, {"TF_RUN_TIMEOUT": "inf"}, "`TF_RUN_TIMEOUT` (inf) must be in (0, 604800] seconds"),
        (LaunchSettings, {"TF_RENDEZVOUS_PORT": "65536"}, "`TF_RENDEZVOUS_PORT` (65536) must be in [1, 65535]"),
        (LaunchSettings, {"TF_STOP_GRACE": "soon"}, "`TF_STOP_GRACE` ('soon') must be a number"),
        (LaunchSettings, {"TF_STOP_GRACE": "0"}, "`TF_STOP_GRACE` (0.0) must be in (0, 3600] seconds"),
        (LaunchSettings, {"TF_STOP_GRACE": "-1"}, "`TF_STOP_GRACE` (-1.0) must be in (0, 3600] seconds"),
        (LaunchSettings, {"TF_STOP_GRACE": "3601"}, "`TF_STOP_GRACE` (3601.0) must be in (0, 3600] seconds"),
        (LaunchSettings, {"TF_STOP_GRACE": "nan"}, "`TF_STOP_GRACE` (nan) must be in (0, 3600] seconds"),
        (
            VerifierSettings,
            {"TF_DATA_SHARDING": "duplicated"},
            "`TF_DATA_SHARDING` ('duplicated') must be one of sharded, replicated",
        ),
        (
            RecoverySettings,
            {"TFCLUSTER_FAULT_EXIT_AT_STEP": "-1"},
            "`TFCLUSTER_FAULT_EXIT_AT_STEP` (-1) must not be negative",
        ),
        (
            RecoverySettings,
            {"TFCLUSTER_FAULT_COMMIT_DELAY": "3601"},
            "`TFCLUSTER_FAULT_COMMIT_DELAY` (3601.0) must be in [0, 3600] seconds",
        ),
        (KeeperSettings, {"TF_RESTART_LIMIT": "many"}, "`TF_RESTART_LIMIT` ('many') must be an integer"),
        (KeeperSettings, {"TF_RESTART_LIMIT": "-1"}, "`TF_RESTART_LIMIT` (-1) must be in [0, 100]"),
    ],
)
def test_every_role_names_a_bad_setting_in_the_same_words(settings, environ, message):
    with pytest.raises(ValueError) as raised:
        settings.from_env(environ)
    assert str(raised.value) == message


def test_text_that_is_no_value_is_named_before_a_value_out_of_range():
    with pytest.raises(ValueError) as raised:
        TrainingSettings.from_env({"TRAIN_EPOCHS": "0", "TRAIN_SEED": "x"})
    assert str(raised.value) == "`TRAIN_SEED` ('x') must be an integer"


def test_only_reads_the_fields_named():
    keeper = KeeperSettings.from_env({"TF_RESTART_LIMIT": "x", "TF_RESULTS_DIR": "/results"}, only=("results_dir",))
    assert keeper == KeeperSettings(restart_limit=3, results_dir="/results")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Example(Settings):
    """Every form of bound the machinery words."""

    floor: int = setting(env="FLOOR", kind=int, at_least=2, default=2)
    above: float = setting(env="ABOVE", kind=float, greater_than=0, default=1.0)
    ceiling: int = setting(env="CEILING", kind=int, at_most=9, default=0)
    below: float = setting(env="BELOW", kind=float, less_than=1, unit="seconds", value_format="g", default=0.0)
    colour: str = setting(env="COLOUR", choices=("red", "blue"), default="red")


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"FLOOR": "1"}, "`FLOOR` (1) must be at least 2"),
        ({"ABOVE": "0"}, "`ABOVE` (0.0) must be more than 0"),
        ({"ABOVE": "nan"}, "`ABOVE` (nan) must be more than 0"),
        ({"CEILING": "10"}, "`CEILING` (10) must be at most 9"),
        ({"BELOW": "1"}, "`BELOW` (1) must be less than 1 seconds"),
        ({"COLOUR": "green"}, "`COLOUR` ('green') must be one of red, blue"),
    ],
)
def test_each_form_of_bound_is_worded(environ, message):
    with pytest.raises(ValueError) as raised:
        Example.from_env(environ)
    assert str(raised.value) == message


def test_a_setting_takes_one_bound_a_side():
    with pytest.raises(ValueError, match="takes one lower bound, not at_least=0 and greater_than=0"):
        setting(env="BOTH", kind=int, at_least=0, greater_than=0, default=1)

import pytest

from trainer.contract.settings import TrainingSettings


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

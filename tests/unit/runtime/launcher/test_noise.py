"""TensorFlow's C++ start-up notices: hidden while the program runs quiet, shown when asked (TF_STARTUP_LOGS)."""

import os
import sys

import pytest

from tests.conftest import one_worker_env, run_python
from trainer.contract.exitcodes import ExitCode
from trainer.contract.settings import LaunchSettings
from trainer.launcher import noise

# As TensorFlow 2.21 prints them (the first four from this image at TF_CPP_MIN_LOG_LEVEL=0), and as
# older releases and GPU builds do.
STARTUP = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796113795.948965       8 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    "available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate "
    "compiler flags.",
    "2024-05-01 12:00:00.123456: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on. You may see "
    "slightly different numerical results due to floating-point round-off errors from different computation orders. "
    "To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.",
    "E0000 00:00:1712345678.123456    1 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register "
    "factory for plugin cuDNN when one has already been registered",
    "2024-05-01 12:00:00.123456: I external/local_tsl/tsl/cuda/cudart_stub.cc:32] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "2024-05-01 12:00:00.123456: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not "
    "find TensorRT",
]
# Lines that may matter are never taken for start-up notices, TensorFlow's own errors included.
KEPT = [
    "E0000 00:00:1796113806.518767      23 coordination_service.cc:502] Coordination agent is set to ERROR: "
    "UNAVAILABLE: failed to connect to all addresses",
    "I0000 00:00:1796113806.410492       8 grpc_server_lib.cc:467] Started server with target: grpc://worker-0:12345",
    "E0000 00:00:1712345678.123456    1 cuda_executor.cc:1015] failed call to cuInit: CUDA_ERROR_NO_DEVICE",
    "To enable the following instructions, read the manual",
    "train | epoch:   1/3   | step:      4 | loss: 0.7459 | accuracy: 0.4375",
    "print('WARNING: All log messages before absl::InitializeLog() is called are written to STDERR')",
]


@pytest.mark.parametrize("line", STARTUP)
def test_each_known_startup_notice_is_recognised(line):
    assert noise.is_startup_line(line + "\n")


@pytest.mark.parametrize("line", KEPT)
def test_other_lines_are_not(line):
    assert not noise.is_startup_line(line + "\n")


def test_only_a_program_told_to_drop_info_lines_runs_quiet():
    assert noise.runs_quiet({"TF_CPP_MIN_LOG_LEVEL": "2"})
    assert noise.runs_quiet({"TF_CPP_MIN_LOG_LEVEL": "1"})
    assert not noise.runs_quiet({"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert not noise.runs_quiet({})  # TensorFlow's own default is 0: everything.


def test_the_setting_is_off_by_default_and_asks_for_every_cpp_line():
    assert LaunchSettings.from_env({}).startup_logs == 0
    assert LaunchSettings.from_env({"TF_STARTUP_LOGS": "1"}).startup_logs == 1
    assert noise.logging_variables(0) == {}
    assert noise.logging_variables(1) == {"TF_CPP_MIN_LOG_LEVEL": "0"}
    with pytest.raises(ValueError, match=r"^`TF_STARTUP_LOGS` \(2\) must be in \[0, 1\]$"):
        LaunchSettings.from_env({"TF_STARTUP_LOGS": "2"})


# A stand-in program that prints TensorFlow's notices around a line of its own, and its level.
PROGRAM = "import os; print(*{lines!r}, sep='\\n'); print('level', os.environ.get('TF_CPP_MIN_LOG_LEVEL'))"


@pytest.mark.parametrize("startup_logs", ["0", "1"])
def test_the_launcher_hides_the_notices_unless_asked(tmp_path, startup_logs):
    lines = [STARTUP[0], KEPT[0], *STARTUP[1:3], "my own line"]
    env = one_worker_env(tmp_path, TF_CPP_MIN_LOG_LEVEL="2", TF_STARTUP_LOGS=startup_logs)
    result = run_python(
        "-m", "trainer.launcher", "--", sys.executable, "-c", PROGRAM.format(lines=lines), env={**env, **_path()}
    )
    assert result.returncode == ExitCode.OK, result.stdout + result.stderr
    recorded = (tmp_path / "worker-0.log").read_text()
    # Asked for: every line, and TensorFlow told to print its INFO lines too.
    expected = [KEPT[0], "my own line", "level 2"] if startup_logs == "0" else [*lines, "level 0"]
    assert _programs(result.stdout) == expected
    assert _programs(recorded) == expected


def test_a_bad_setting_is_a_config_error(tmp_path):
    env = one_worker_env(tmp_path, TF_STARTUP_LOGS="yes")
    result = run_python("-m", "trainer.launcher", "--", sys.executable, "-c", "pass", env={**env, **_path()})
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stderr == "trainer: config error: `TF_STARTUP_LOGS` ('yes') must be an integer\n"


def _programs(output: str) -> list[str]:
    """The program's lines of a launcher's output: not the launcher's own, nor its traffic record."""
    return [line for line in output.splitlines() if not line.startswith(("launcher |", '{"event": "connections"'))]


def _path() -> dict[str, str]:
    # The launcher runs from the project's root (run_python), as the image runs it from /app.
    return {"PYTHONPATH": os.getcwd()}

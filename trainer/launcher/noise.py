"""TensorFlow's C++ start-up notices: which lines they are, and whether a worker's output shows them.

The image runs every program with TF_CPP_MIN_LOG_LEVEL=2 (docker/Dockerfile): TensorFlow then
drops its own INFO and WARNING lines at the source. A few lines get through all the same, and
users read them as problems although they say nothing about the run:

- absl's preamble, `WARNING: All log messages before absl::InitializeLog() is called are written
  to STDERR`, printed before the first C++ log line that gets through, whatever its level;
- notices about the build and the machine, identical on every run: the instructions the binary
  could use (cpu_feature_guard, two lines), oneDNN's rounding notice, CUDA plugins registered twice
  and no CUDA driver or TensorRT on an image that hides GPUs on purpose.

Those lines, and only those, are kept out of the worker's output and its results log while the
program runs quiet (TF_CPP_MIN_LOG_LEVEL of 1 or more). Every other line, an error that follows
absl's preamble included, is shown. `TF_STARTUP_LOGS=1` (LaunchSettings) asks for them: the program
runs with TF_CPP_MIN_LOG_LEVEL=0, so TensorFlow prints its C++ log lines, and none is hidden. Not
recorded either, because the verifier reads a log's last error-like line as a reason (oneDNN's
notice speaks of "round-off errors"); they are the same on every run, so nothing is lost.
"""

import re
from collections.abc import Mapping

# TensorFlow's C++ log prefix: absl's (`I0000 00:00:1796113795.948965  8 file.cc:227] `) or the
# older one (`2024-05-01 12:00:00.000000: I tensorflow/core/util/port.cc:113] `).
_PREFIX = r"^(?:[IWE]\d{4} [\d:.]+ +\d+ |\d{4}-\d\d-\d\d [\d:.]+: [IWE] )\S+:\d+\] "
_STARTUP = re.compile(
    "|".join(
        [
            r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$",
            _PREFIX + r"This TensorFlow binary is optimized to use available CPU instructions",
            r"^To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags\.$",
            _PREFIX + r"oneDNN custom operations are on\.",
            _PREFIX + r"Unable to register cu(DNN|FFT|BLAS) factory: ",
            _PREFIX + r"Could not find cuda drivers on your machine, GPU will not be used\.",
            _PREFIX + r"TF-TRT Warning: Could not find TensorRT",
        ]
    )
)
LEVEL = "TF_CPP_MIN_LOG_LEVEL"


def is_startup_line(line: str) -> bool:
    """Whether `line` is one of TensorFlow's known C++ start-up notices."""
    return _STARTUP.search(line.rstrip("\r\n")) is not None


def runs_quiet(environment: Mapping[str, str]) -> bool:
    """Whether a program with this environment asked TensorFlow to drop INFO lines (level 1 or more)."""
    return environment.get(LEVEL, "").strip() in ("1", "2", "3")


def logging_variables(startup_logs: int) -> dict[str, str]:
    """What TF_STARTUP_LOGS adds to the program's environment: TensorFlow's C++ log lines, every one."""
    return {LEVEL: "0"} if startup_logs else {}

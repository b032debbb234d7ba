"""The worker's PID 1: runs the training program and records how it ended for the verifier.

`python -m trainer.launch [-- COMMAND...]` (default command: `python -m trainer`). It gives the
program TF_CONFIG built from the cluster template, copies the program's output to its own stdout
and to the results directory (trainer.results), and records the exit status. TensorFlow ignores
SIGTERM while it waits on peers, so the launcher handles it: it stops the program, and kills it if
it has not ended within a short grace period, instead of letting Docker wait out its own.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from trainer import cluster as cluster_config
from trainer.exitcodes import ExitCode
from trainer.results import Recorder, WorkerFiles

# How long the program gets to end on SIGTERM before it is killed; well inside Docker's 10 s.
STOP_GRACE_SECONDS = 2.0


def say(line: str) -> None:
    print(f"launcher | {line}", flush=True)


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    command = command or [sys.executable, "-m", "trainer"]
    results_dir = os.environ.get("TF_RESULTS_DIR", "").strip()

    try:
        cluster = cluster_config.from_env(os.environ)
    except ValueError as error:
        message = f"trainer: config error: {error}"
        print(message, file=sys.stderr, flush=True)
        if results_dir:
            recorder = Recorder(WorkerFiles(Path(results_dir), socket.gethostname()))
            recorder.log_line(message + "\n")
            recorder.finish(ExitCode.CONFIG_ERROR)
        return ExitCode.CONFIG_ERROR

    recorder = Recorder(WorkerFiles(Path(results_dir), cluster.host)) if results_dir else None
    environment = {**os.environ, "TF_CONFIG": cluster.tf_config_json()}
    program = subprocess.Popen(
        command,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    stopping = []

    def stop(signum, _frame):
        # A signal handler may interrupt a print in progress, so it writes to the file descriptor
        # directly and leaves the waiting to a timer: no buffered I/O and no blocking in here.
        if stopping:
            return
        stopping.append(signum)
        message = f"launcher | {cluster.host}: received {signal.Signals(signum).name}, stopping the training program\n"
        os.write(sys.stdout.fileno(), message.encode())
        try:
            os.killpg(program.pid, signal.SIGTERM)
        except ProcessLookupError:
            return  # It has already ended.
        # TensorFlow's preemption notifier swallows SIGTERM; nothing short of SIGKILL ends it.
        killer = threading.Timer(STOP_GRACE_SECONDS, _kill_group, args=(program.pid,))
        killer.daemon = True
        killer.start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    for line in program.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if recorder:
            recorder.log_line(line)
    exit_code = program.wait()
    if stopping:
        exit_code = ExitCode.TERMINATED
        say(f"{cluster.host}: stopped by {signal.Signals(stopping[0]).name} (exit {exit_code})")
    elif exit_code < 0:
        exit_code = 128 - exit_code  # Killed by a signal: report it as a shell would.
    if recorder:
        recorder.finish(exit_code)
    return exit_code


def _kill_group(process_group: int) -> None:
    try:
        os.killpg(process_group, signal.SIGKILL)
    except ProcessLookupError:
        pass  # It ended within the grace period.


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

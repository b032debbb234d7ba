"""The keeper's entry point: `python -m trainer.keeper` (the `keeper` service of compose.recovery.yaml).

Exit codes: 0 every worker finished well; 8 it gave up; 2 bad configuration; 143 stopped by a signal.
"""

import os
import signal
import socket
import sys
import time
from pathlib import Path

import docker
import docker.errors

from trainer.contract.console import config_error
from trainer.contract.exitcodes import ExitCode
from trainer.contract.resultsdir import Recorder, WorkerFiles
from trainer.contract.settings import KeeperSettings, LaunchSettings
from trainer.keeper.keeper import NAME, PROJECT_LABEL, Keeper


def main() -> int:
    try:
        settings = KeeperSettings.from_env(os.environ)
    except ValueError as error:
        # The results directory is a path, which no value makes bad: read on its own, it still
        # records the bad setting for the verifier.
        results_dir = KeeperSettings.from_env(os.environ, only=("results_dir",)).results_dir
        return config_error("keeper", str(error), recorder_in(results_dir))
    recorder = recorder_in(settings.results_dir)
    limit = settings.restart_limit
    try:
        # The verifier's bound on the whole run, from the same deadlines: every run of the cluster may
        # take its join and run deadlines.
        deadlines = LaunchSettings.from_env(os.environ, only=("join_timeout", "run_timeout"))
    except ValueError as error:
        return config_error("keeper", str(error), recorder)
    deadline = time.time() + (limit + 1) * (deadlines.join_timeout + deadlines.run_timeout) + 30
    try:
        client = docker.from_env()
        # Its own container says which Compose project to keep (its hostname is its container ID).
        project = client.containers.get(socket.gethostname()).labels[PROJECT_LABEL]
    except (ValueError, KeyError, docker.errors.DockerException) as error:
        return config_error("keeper", str(error), recorder)

    keeper = Keeper(client, project, limit=limit, recorder=recorder, deadline=deadline)

    def stop(signum, _frame):
        raise SystemExit(ExitCode.TERMINATED)

    signal.signal(signal.SIGTERM, stop)
    code = ExitCode.TERMINATED
    try:
        code = keeper.run()
    except docker.errors.DockerException as error:  # The engine refused or lost something: no traceback.
        keeper.say(f"gave up: the Docker engine failed: {error}")
        code = ExitCode.GAVE_UP
    finally:
        if recorder:
            recorder.finish(code, restarts=keeper.restarts, limit=limit)
    return code


def recorder_in(results_dir: str) -> Recorder | None:
    """The keeper's own files in the results directory, as a worker's (empty: none, so nothing recorded)."""
    return Recorder(WorkerFiles(Path(results_dir), NAME)) if results_dir else None


if __name__ == "__main__":
    sys.exit(main())

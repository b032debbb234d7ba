"""The worker's PID 1: `python -m trainer.launcher [-- COMMAND...]` (default `python -m trainer.training`).

It validates the configuration, meets every peer at the rendezvous, runs the training program
with TF_CONFIG built from the cluster template, and bounds everything (trainer/launcher/supervisor.py).
It records how the program ended in the results directory for the verifier (trainer/contract/resultsdir.py).
"""

import os
import signal
import socket
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

from trainer.contract import cluster as cluster_config
from trainer.contract.console import config_error
from trainer.contract.exitcodes import ExitCode
from trainer.contract.resultsdir import Recorder, WorkerFiles
from trainer.contract.settings import LaunchSettings, RecoverySettings, TrainingSettings
from trainer.launcher import digests, fullresults, noise, rendezvous, runtime, warm
from trainer.launcher.forked import Forking
from trainer.launcher.supervisor import Deadlines, Supervisor


def main(argv: list[str]) -> int:
    # Until the supervisor handles signals: reading a large project may take a while, and PID 1
    # without a handler would ignore `docker stop`.
    signal.signal(signal.SIGTERM, _stopped_early)
    signal.signal(signal.SIGINT, _stopped_early)
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    command = command or [sys.executable, "-m", "trainer.training"]
    results_dir = os.environ.get("TF_RESULTS_DIR", "").strip()
    try:
        cluster = cluster_config.from_env(os.environ)
        settings = TrainingSettings.from_env(os.environ)
        launch = LaunchSettings.from_env(os.environ)
        _check_rendezvous_port(cluster, launch.rendezvous_port)
        _check_identity(cluster, socket.gethostname())
        fingerprint = _fingerprint(cluster, settings, launch, os.environ, command)
    except ValueError as error:
        name = socket.gethostname()
        return _config_error(str(error), Recorder(WorkerFiles(Path(results_dir), name)) if results_dir else None)

    # The running status names the cluster and this run, for the worker's network shaper
    # (trainer/shaper/__main__.py), which echoes the run in its report.
    run_id = uuid.uuid4().hex
    if launch.warm == "1":
        warm.clear_earlier_runs(launch.results_dir, os.environ.get("TF_CHECKPOINT_DIR", ""))
    try:
        recorder = _recorder(launch.results_dir, cluster, run_id)
    except OSError as error:  # Its first status did not fit: a volume full before the run began.
        return fullresults.at_start(error, launch.results_dir, cluster.host)
    try:
        supervisor = Supervisor(
            cluster=cluster,
            fingerprint=fingerprint,
            rendezvous_base_port=launch.rendezvous_port,
            deadlines=Deadlines(
                join=launch.join_timeout,
                run=launch.run_timeout,
                stop_grace=launch.stop_grace,
                stall=launch.stall_timeout,
            ),
            recorder=recorder,
            shaped_in=launch.results_dir if launch.network_profile else None,
            run_id=run_id,
            results_dir=launch.results_dir or None,
        )
    except OSError as error:  # The rendezvous port is taken, most likely.
        return _config_error(f"cannot serve the rendezvous on port {launch.rendezvous_port}: {error}", recorder)
    signal.signal(signal.SIGTERM, supervisor.handle_signal)
    signal.signal(signal.SIGINT, supervisor.handle_signal)
    variables = {**noise.logging_variables(launch.startup_logs), "TF_CONFIG": cluster.tf_config_json()}
    # A zygote still importing (the first warm run) counts against the join deadline.
    forking = Forking(launch.join_timeout, launch.zygote_socket) if launch.warm == "1" else None
    return supervisor.run(command, {**os.environ, **variables}, forking)


def _fingerprint(
    cluster: cluster_config.Cluster,
    settings: TrainingSettings,
    launch: LaunchSettings,
    environ: Mapping[str, str],
    command: list[str],
) -> rendezvous.Fingerprint:
    """What this worker compares with every peer: the settings, the user's own, the versions, and digests of the code.

    The user's settings are read here, as every other variable is: `TFCLUSTER_USER_ENV` names them.
    """
    project = None
    if launch.project_dir:
        try:
            project = digests.project_digest(launch.project_dir)
        except ValueError as error:
            raise ValueError(f"`TFCLUSTER_PROJECT_DIR` ({launch.project_dir!r}) {error}") from None
    # The launcher's own package: in the image, /app/trainer, the default program's code too.
    package_dir = str(Path(__file__).resolve().parents[1])
    # The program runs in the launcher's working directory: the files its words name are found from there.
    program = (
        digests.command_digest(command, os.getcwd(), covered=(launch.project_dir, package_dir))
        if launch.compare_command == "1"
        else digests.UNCOMPARED_COMMAND
    )
    return rendezvous.Fingerprint.of(
        cluster,
        settings,
        user_settings={name: digests.value_digest(environ.get(name)) for name in launch.user_variables},
        project=project,
        packages=digests.packages_digest(),
        # Only the directory: the faults beside it are injected into one worker on purpose.
        checkpoint_dir=RecoverySettings.from_env(environ, only={"checkpoint_dir"}).checkpoint_dir,
        variables=runtime.computation_variables(
            environ, compared_otherwise=launch.user_variables, warm=launch.warm == "1"
        ),
        versions=runtime.versions(),
        image=digests.image_digest(package_dir),
        command=program,
    )


def _recorder(results_dir: str, cluster: cluster_config.Cluster, run_id: str) -> Recorder | None:
    if not results_dir:
        return None
    return Recorder(WorkerFiles(Path(results_dir), cluster.host), workers=list(cluster.workers), run=run_id)


def _stopped_early(signal_number, _frame) -> None:
    print(f"launcher: stopped by {signal.Signals(signal_number).name} before the rendezvous", flush=True)
    raise SystemExit(ExitCode.TERMINATED)


def _config_error(reason: str, recorder: Recorder | None) -> int:
    return config_error("trainer", reason, recorder)


def _check_rendezvous_port(cluster: cluster_config.Cluster, base: int) -> None:
    for position, address in enumerate(cluster.workers):
        port = rendezvous.rendezvous_port(cluster, position, base)
        host = cluster_config.host_of(address)
        if any(other == f"{host}:{port}" for other in cluster.workers):
            raise ValueError(f"`TF_RENDEZVOUS_PORT` ({base}) gives {host} port {port}, its TensorFlow port too")


def _check_identity(cluster: cluster_config.Cluster, hostname: str) -> None:
    """A container whose own name is in the cluster list must be the entry its index points at."""
    hosts = [cluster_config.host_of(address) for address in cluster.workers]
    if hostname in hosts and hostname != cluster.host:
        raise ValueError(
            f"this host is {hostname}, entry {hosts.index(hostname)} of the cluster, "
            f"but `TF_TASK_INDEX` is {cluster.index} ({cluster.host})"
        )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

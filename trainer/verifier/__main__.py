#!/usr/bin/env python3
"""Verify a multi-worker training run: every worker exited 0, reported, and agrees.

The `verifier` service runs it as `python -m trainer.verifier --results /results`; on the host,
scripts/verify runs it on saved logs. Its options and exit codes: `--help`, or docs/commands.md.
"""

import argparse
import os
import signal
import sys
from pathlib import Path

from trainer.contract import cluster as cluster_config
from trainer.contract.console import config_error
from trainer.contract.exitcodes import ExitCode
from trainer.contract.faults import parse as parse_faults
from trainer.contract.settings import KeeperSettings, LaunchSettings, VerifierSettings
from trainer.verifier import faults, given_exits, links, render, sources
from trainer.verifier.recovery import from_keeper
from trainer.verifier.verdict import WorkerReport, judge

EPILOG = """\
examples:
  scripts/verify --exit-codes worker-0=0,worker-1=0 worker-0.log worker-1.log  # logs and their exits
  scripts/verify --exit-codes-from codes.txt --json --junit v.xml logs/*.log   # JSON and JUnit XML
  scripts/verify --allow-unknown-exits worker-0.log worker-1.log  # logs whose exit codes are lost
  docker compose ps -a --format '{{.Service}} {{.ExitCode}}' worker-0 worker-1 > codes.txt
  scripts/verify --exit-codes-from codes.txt logs/*.log          # the same, as CI writes them
  scripts/verify --lost "worker-2=its host went down" worker-1.log   # a worker with no log to judge
  python -m trainer.verifier --results /results --keeper keeper   # the service, with the keeper

exit status:
  0    ok: every worker exited 0, trained with all its peers and agrees
  2    config error: a bad argument or setting, named in one line
  7    verification failed: the table (or the JSON) says why
  143  terminated: stopped by SIGTERM before a verdict"""


class Parser(argparse.ArgumentParser):
    """argparse, with a mistake reported as every config error is: one line, exit 2 (trainer.contract.console)."""

    def error(self, message):
        sys.exit(config_error("verify", message))


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = Parser(
        prog="scripts/verify",
        description=f"{__doc__.splitlines()[0]}\nThe verifier service runs it as python -m trainer.verifier.",
        epilog=EPILOG,
        # Laid out as the host commands' help is (docs/commands.md), whatever the terminal.
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=100, max_help_position=24),
        allow_abbrev=False,
    )
    parser.add_argument("logs", nargs="*", type=Path, metavar="LOG", help="saved worker logs, one file per worker")
    parser.add_argument(
        "--results", type=Path, metavar="DIR", help="the results directory the workers' launchers write to"
    )
    parser.add_argument(
        "--workers",
        metavar="NAMES",
        help="the expected workers, comma-separated (default: the hosts of TF_WORKER_HOSTS, or one per log file)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="seconds to wait for the workers to finish (default: TF_JOIN_TIMEOUT + TF_RUN_TIMEOUT + 30)",
    )
    parser.add_argument(
        "--keeper",
        metavar="NAME",
        help="with --results: wait for the keeper of this name (compose.recovery.yaml) and report its restarts",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        metavar="DELTA",
        help="largest absolute metric difference (default: 0, exact)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the verdict as one JSON line instead of a table (default: off)"
    )
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write the verdict as JUnit XML to this file")
    add_exit_code_options(parser)
    arguments = parser.parse_args(argv)
    if bool(arguments.logs or arguments.lost) == bool(arguments.results):
        parser.error("give either --results DIR or log files, not both or neither")
    if arguments.keeper and not arguments.results:
        parser.error("--keeper needs --results")
    if arguments.results and (
        arguments.exit_codes is not None or arguments.exit_codes_from or arguments.lost or arguments.allow_unknown_exits
    ):
        parser.error(
            "--exit-codes, --exit-codes-from, --allow-unknown-exits and --lost are for log files (with --results, "
            "the workers record theirs)"
        )
    if arguments.timeout is not None and arguments.timeout <= 0:
        parser.error(f"--timeout ({arguments.timeout}) must be positive")
    if arguments.tolerance < 0:
        parser.error(f"--tolerance ({arguments.tolerance}) must not be negative")
    return arguments


def add_exit_code_options(parser: argparse.ArgumentParser) -> None:
    """For saved logs, which hold no exit status: the codes CI knows (trainer/verifier/given_exits.py)."""
    parser.add_argument(
        "--exit-codes",
        metavar="NAME=CODE,...",
        help="with log files: each worker's exit code, e.g. worker-0=0,worker-1=1 (default: unknown)",
    )
    parser.add_argument(
        "--exit-codes-from",
        type=Path,
        metavar="FILE",
        help="with log files: exit codes as `NAME CODE` lines, e.g. what "
        "`docker compose ps --all --format '{{.Service}} {{.ExitCode}}'` prints",
    )
    parser.add_argument(
        "--allow-unknown-exits",
        action="store_true",
        help="with log files: judge a log given no exit code by its contents alone (default: off, such a "
        "worker fails the verdict, as a live worker with no exit status does)",
    )
    parser.add_argument(
        "--lost",
        action="append",
        default=[],
        metavar="NAME=WHY",
        help="a worker that left neither a log nor an exit code, and why (its host went down, say); "
        "it fails the verdict with that reason; may be repeated (default: none)",
    )


def harness_cluster(arguments: argparse.Namespace, environ) -> list[str] | None:
    """The workers' addresses as the launchers gave them to TensorFlow, when the cluster's settings are here."""
    hosts = environ.get("TF_WORKER_HOSTS")
    if not hosts or arguments.workers:
        return None
    port = environ.get("TF_WORKER_PORT", str(cluster_config.DEFAULT_PORT))
    if not port.strip().isdigit():
        raise ValueError(f"`TF_WORKER_PORT` ({port!r}) must be an integer in [1, 65535]")
    return list(cluster_config.from_template(hosts, 0, default_port=int(port)).workers)


def expected_names(arguments: argparse.Namespace, environ) -> list[str] | None:
    hosts = arguments.workers or environ.get("TF_WORKER_HOSTS")
    if hosts:
        workers = cluster_config.from_template(hosts, 0).workers
        return [cluster_config.host_of(address) for address in workers]
    return None


def saved_logs(arguments: argparse.Namespace) -> list[WorkerReport]:
    """The log files' reports, with the exit codes given for them; a ValueError names what is wrong."""
    missing = [str(path) for path in arguments.logs if not path.is_file()]
    if missing:
        raise ValueError(f"no such log file: {', '.join(missing)}")
    given_exits.check_distinct(arguments.logs)
    pairs = given_exits.from_option(arguments.exit_codes or "")
    if arguments.exit_codes_from:
        try:
            text = arguments.exit_codes_from.read_text(errors="replace")
        except OSError as error:
            raise ValueError(f"--exit-codes-from: cannot read {arguments.exit_codes_from}: {error.strerror}") from None
        pairs += given_exits.from_file(text, str(arguments.exit_codes_from))
    codes = given_exits.match(pairs, [path.stem for path in arguments.logs])
    lost = given_exits.lost(arguments.lost, [path.stem for path in arguments.logs])
    return sources.from_log_files(arguments.logs, codes) + sources.lost(lost)


def stop(signum, _frame):
    # As PID 1 of its container the verifier would otherwise ignore SIGTERM (`docker compose down`).
    print(f"verify: stopped by {signal.Signals(signum).name} before a verdict", file=sys.stderr, flush=True)
    sys.exit(ExitCode.TERMINATED)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, stop)
    arguments = parse_arguments(argv)
    try:
        names = expected_names(arguments, os.environ)
        cluster = harness_cluster(arguments, os.environ)
        # The workers' own deadlines bound the wait: a worker not started by the end of the join
        # deadline never will be, and none outlives its run deadline.
        launch = LaunchSettings.from_env(os.environ)
        limit = KeeperSettings.from_env(os.environ).restart_limit
        intent = VerifierSettings.from_env(os.environ)
        # The network faults asked for, each to be found in a shaper's record (faults.py).
        asked = [fault.describe() for fault in parse_faults(intent.faults_text, names)]
    except ValueError as error:
        return config_error("verify", str(error))
    recovery, shaped, injected = None, (), ()
    if arguments.results:
        if names is None:
            return config_error("verify", "--results needs the expected workers: --workers or TF_WORKER_HOSTS")
        # With a keeper, every run of the cluster may take as long as the first.
        runs = limit + 1 if arguments.keeper else 1
        timeout = arguments.timeout or runs * (launch.join_timeout + launch.run_timeout) + 30
        start_timeout = min(timeout, launch.join_timeout + 15)
        waited_for = [arguments.keeper, *names] if arguments.keeper else names
        print(f"verify | waiting up to {timeout:.0f}s for {', '.join(waited_for)}", flush=True)
        if arguments.keeper:
            reports, keeper_record = sources.with_keeper(
                arguments.results, names, arguments.keeper, timeout=timeout, start_timeout=start_timeout
            )
            recovery = from_keeper(keeper_record, reports[0].log if reports else "")
        else:
            reports = sources.from_results_dir(arguments.results, names, timeout=timeout, start_timeout=start_timeout)
        shaped = sources.network_reports(arguments.results, names)
        restarts = keeper_record.details.get("restarts") if arguments.keeper else None
        injected = faults.records(arguments.results, names, restarts, asked=asked)
    else:
        try:
            reports = saved_logs(arguments)
        except ValueError as error:
            return config_error("verify", str(error))
    verdict = judge(
        reports,
        expected_workers=len(names) if names else len(reports),
        tolerance=arguments.tolerance,
        recovery=recovery,
        network=shaped,
        links=links.matrix(arguments.results, names) if arguments.results else None,
        faults=injected,
        cluster=cluster,
        unknown_exits_fail=not arguments.allow_unknown_exits,
        data_replicated=intent.data_sharding == "replicated",
    )
    if arguments.results and not arguments.json:
        # The live verdict as data, before the table people read last: whoever drove the run reads
        # it from this service's log (trainer/contract/verdict.py), not by judging the logs again.
        print(render.as_json(verdict), flush=True)
    print(render.as_json(verdict) if arguments.json else render.table(verdict), flush=True)
    if arguments.junit:
        arguments.junit.write_text(render.junit(verdict), encoding="utf-8")
    return ExitCode.OK if verdict.passed else ExitCode.VERIFICATION_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

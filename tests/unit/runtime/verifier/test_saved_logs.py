"""Saved logs are verified as strictly as a live run: why a log has no metrics, and the exit codes CI gives.

Run as a user runs them (`python -m trainer.verifier LOG...`): exit codes and whole lines asserted.
"""

import json
import os
import shutil

import pytest

from tests.conftest import FIXTURES, run_python
from trainer.contract import verdict as verdict_record
from trainer.contract.exitcodes import ExitCode
from trainer.contract.resultsdir import Recorder, WorkerFiles
from trainer.verifier import given_exits

TUTORIAL = FIXTURES / "logs" / "tutorial"
# A worker whose peer was lost: TensorFlow's error, then the launcher's closing line (no traceback).
LOST = (
    "train | epoch:   6/100000 | step:     24 | loss: 0.1741 | accuracy: 0.9922\n"
    "Collective ops is aborted by: Error reported from /job:worker/task:0: The following tasks are unhealthy\n"
    "\t [[{{node CollectiveReduceV2}}]] [Op:__inference_train_step_1139]\n"
    "launcher | worker-1:12345: training program exited 1 after losing peer(s): worker-0:12345 "
    "(name not resolvable (3 heartbeats missed))\n"
    "launcher | worker-1:12345: training program used 7.2s, 9.1 CPU-seconds, peak memory 542 MiB\n"
)
LOST_REASON = (
    "launcher | worker-1:12345: training program exited 1 after losing peer(s): worker-0:12345 "
    "(name not resolvable (3 heartbeats missed))"
)


def verify(*arguments, **variables):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TF_", "TRAIN_"))}
    return run_python("-m", "trainer.verifier", *map(str, arguments), env=env | variables)


@pytest.fixture
def logs(tmp_path):
    """worker-0.log: the tutorial's good log; worker-1.log: one that lost its peer."""
    shutil.copy(TUTORIAL / "worker-0.log", tmp_path / "worker-0.log")
    (tmp_path / "worker-1.log").write_text(LOST)
    return [tmp_path / "worker-0.log", tmp_path / "worker-1.log"]


UNKNOWN_EXIT = "exit status unknown: give it (--exit-codes, --exit-codes-from), or pass --allow-unknown-exits"


def problems(result) -> list[str]:
    return [line.removeprefix("  - ") for line in result.stdout.splitlines() if line.startswith("  - ")]


def test_a_log_without_metrics_shows_its_last_error_line(logs):
    result = verify("--allow-unknown-exits", *logs)
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout + result.stderr
    assert problems(result) == [f"worker-1: no final metrics in its log; last error line: {LOST_REASON}"]


def test_a_log_without_metrics_or_any_error_line_says_only_that(tmp_path):
    # Its last line would be the launcher's usage line, or the program's last words: no reason.
    (tmp_path / "worker-0.log").write_text(
        "done\nlauncher | worker-0:12345: training program used 0.1s, 0.1 CPU-seconds, peak memory 3 MiB\n"
    )
    (tmp_path / "worker-1.log").write_text("")
    result = verify(tmp_path / "worker-0.log", tmp_path / "worker-1.log")
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    # Nor a record of its model state: it is not proven to have trained in sync, and the verdict says so.
    unproven = (
        "no record of its model state: the observer recorded nothing (its program did not import TensorFlow, "
        "or ran outside this harness's image and launcher)"
    )
    assert problems(result) == [f"worker-0: {unproven}", f"worker-1: {unproven}"]


def test_a_worker_given_a_failed_exit_code_fails_even_with_agreeing_metrics(tmp_path):
    for index in (0, 1):
        shutil.copy(TUTORIAL / f"worker-{index}.log", tmp_path / f"worker-{index}.log")
    saved = [tmp_path / "worker-0.log", tmp_path / "worker-1.log"]
    # Asked to judge them without exit codes, the logs alone pass.
    assert verify("--allow-unknown-exits", *saved).returncode == ExitCode.OK
    result = verify("--exit-codes", "worker-0=0,worker-1=137", *saved)
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout
    # Its log says no more than the launcher's last line (the observer's records are never the reason).
    assert len(problems(result)) == 1, result.stdout
    assert problems(result)[0].startswith("worker-1: exited 137: launcher | worker-1:12345: training program used ")
    assert "worker-1  exited 137  2" in result.stdout  # The table's status column, as a live run's.


def test_exit_codes_of_0_pass_and_show_in_the_table(tmp_path):
    for index in (0, 1):
        shutil.copy(TUTORIAL / f"worker-{index}.log", tmp_path / f"worker-{index}.log")
    result = verify("--exit-codes", "worker-0=0,worker-1=0", tmp_path / "worker-0.log", tmp_path / "worker-1.log")
    assert result.returncode == ExitCode.OK, result.stdout
    assert "worker-0  exited 0" in result.stdout and "worker-1  exited 0" in result.stdout


def test_a_saved_log_with_its_exit_code_reads_as_the_live_run_did(logs, tmp_path):
    # The same log and exit code, recorded in a results directory as a launcher does (without a
    # status reason: the log alone says why), and given to the saved-logs mode.
    results = tmp_path / "results"
    results.mkdir()
    for path, code in zip(logs, (ExitCode.OK, ExitCode.PEER_LOST), strict=True):
        recorder = Recorder(WorkerFiles(results, path.stem))
        for line in path.read_text().splitlines(keepends=True):
            recorder.log_line(line)
        recorder.finish(code)
    live = verify("--results", results, "--workers", "worker-0,worker-1", "--timeout", "10")
    saved = verify("--exit-codes", "worker-0=0,worker-1=5", *logs)
    assert live.returncode == saved.returncode == ExitCode.VERIFICATION_FAILED
    assert problems(saved) == problems(live) == [f"worker-1: exited 5: {LOST_REASON}"]
    # The live verdict also prints its record, before the table people read last: the host reads
    # it (trainer/contract/verdict.py); the saved-logs mode, whose table is for people, does not.
    record = verdict_record.found_in(live.stdout.splitlines())
    assert record is not None and record["passed"] is False
    assert [worker["problem"] for worker in record["workers"]] == [None, f"exited 5: {LOST_REASON}"]
    lines = live.stdout.splitlines()
    assert lines.index(next(line for line in lines if line.startswith('{"event": "verdict"'))) < len(lines) - 2
    assert lines[-2].startswith("verdict: FAIL")
    assert verdict_record.found_in(saved.stdout.splitlines()) is None


@pytest.mark.parametrize(
    "written_by",
    [
        # docker compose ps -a --format '{{.Service}} {{.ExitCode}}' worker-0 worker-1
        "worker-0 0\nworker-1 5\n",
        # docker inspect --format '{{.Name}} {{.State.ExitCode}}' CONTAINER...
        "/tfc-ci-123-worker-0-1 0\n/tfc-ci-123-worker-1-1 5\n",
        "# by hand\n\nworker-1 5\n",
    ],
    ids=["compose-ps", "docker-inspect", "by-hand"],
)
def test_exit_codes_from_a_file_as_ci_writes_it(logs, tmp_path, written_by):
    codes = tmp_path / "codes.txt"
    codes.write_text(written_by)
    result = verify("--exit-codes-from", codes, "--junit", tmp_path / "verdict.xml", *logs)
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    # A worker the file gives no code (by hand, worker-0) fails too: its exit is unknown.
    unknown = [] if "worker-0" in written_by else [f"worker-0: {UNKNOWN_EXIT}"]
    assert problems(result) == [*unknown, f"worker-1: exited 5: {LOST_REASON}"]
    assert f"exited 5: {LOST_REASON}" in (tmp_path / "verdict.xml").read_text()


def test_a_lost_worker_fails_the_verdict_with_why_and_needs_no_log(logs, tmp_path):
    result = verify(
        "--workers", "worker-0,worker-1",
        "--exit-codes", "worker-0=0",
        "--lost", "worker-1=its host node-2 went down: its engine does not answer",
        "--junit", tmp_path / "verdict.xml",
        logs[0],
    )  # fmt: skip
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout + result.stderr
    assert problems(result) == ["worker-1: lost: its host node-2 went down: its engine does not answer"]
    assert "worker-0  exited 0  2" in result.stdout  # The one heard is judged as ever.
    assert "worker-1  lost" in result.stdout
    assert (
        "lost: its host node-2 went down: its engine does not answer</failure>"
        in (tmp_path / "verdict.xml").read_text()
    )
    # Every worker lost: nothing to read, and still a verdict, not a usage error.
    alone = verify("--lost", "worker-0=gone", "--lost", "worker-1=gone too")
    assert alone.returncode == ExitCode.VERIFICATION_FAILED, alone.stderr
    assert problems(alone) == ["worker-0: lost: gone", "worker-1: lost: gone too"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--lost", "worker-1"], "--lost: 'worker-1' is not NAME=WHY (e.g. worker-2=its host went down)"),
        (["--lost", "worker-1=gone"], "--lost: worker-1 is given twice (as lost, and as a log)"),
        (
            ["--lost", "worker-2=gone", "--lost", "worker-2=again"],
            "--lost: worker-2 is given twice (as lost, and lost again)",
        ),
        (["--exit-codes", "worker-2=0"], "exit codes: 'worker-2' matches no log (the logs: worker-0, worker-1)"),
        (["--exit-codes", "worker-1=x"], "exit codes: the exit code of worker-1 ('x') must be an integer in [0, 255]"),
        (
            ["--exit-codes", "worker-1=256"],
            "exit codes: the exit code of worker-1 ('256') must be an integer in [0, 255]",
        ),
        (["--exit-codes", "worker-1"], "--exit-codes: 'worker-1' is not NAME=CODE (e.g. worker-1=0)"),
        (["--exit-codes", "worker-1=0,worker-1=1"], "exit codes: worker-1 is given two exit codes, 0 and 1"),
        (
            ["--exit-codes", "worker-0=0", "--results", "/tmp"],
            "--exit-codes, --exit-codes-from, --allow-unknown-exits and --lost are for log files",
        ),
    ],
)
def test_bad_exit_codes_are_one_line_and_the_config_exit_code(logs, arguments, message):
    if "--results" in arguments:
        logs = []
    result = verify(*arguments, *logs)
    assert result.returncode == ExitCode.CONFIG_ERROR, result.stdout
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert result.stdout == ""


def test_a_bad_exit_codes_file_is_named_with_its_line(logs, tmp_path):
    codes = tmp_path / "codes.txt"
    codes.write_text("worker-0 0\nworker-1 exited 5\n")
    result = verify("--exit-codes-from", codes, *logs)
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert (
        result.stderr
        == f"verify: config error: {codes}, line 2: 'worker-1 exited 5' is not `NAME CODE` (e.g. worker-1 0)\n"
    )
    missing = verify("--exit-codes-from", tmp_path / "none.txt", *logs)
    assert missing.returncode == ExitCode.CONFIG_ERROR
    assert missing.stderr == (
        f"verify: config error: --exit-codes-from: cannot read {tmp_path / 'none.txt'}: No such file or directory\n"
    )


def test_a_container_name_matches_only_its_own_log():
    logs = ["worker-1", "worker-11"]
    assert given_exits.match([("/p-worker-11-1", "3"), ("/p-worker-1-1", "0")], logs) == {"worker-11": 3, "worker-1": 0}
    with pytest.raises(ValueError, match="'/p-worker-2-1' matches no log"):
        given_exits.match([("/p-worker-2-1", "0")], logs)


# A worker the launcher stopped for memory, as saved after `docker compose stop`: TensorFlow's error,
# the launcher's closing line and the same as an event, then the stop it received while lingering.
OUT_OF_MEMORY_REASON = (
    "launcher | worker-1:12345: out of memory: thrashing at its 250 MiB memory limit (peak 250 MiB), "
    "reading back 4724 evicted pages a second for 10s: stopped"
)
OUT_OF_MEMORY = (
    "Traceback (most recent call last):\n"
    '  File "/app/trainer/training/loop.py", line 64, in train\n'
    "tensorflow.python.framework.errors_impl.UnavailableError: Collective ops is aborted by: failed to connect\n"
    "launcher | worker-1:12345: training program used 21.7s, 10.7 CPU-seconds (busy 25% of 2 CPUs), "
    "peak memory 229 MiB\n"
    f"{OUT_OF_MEMORY_REASON}\n"
    f"{json.dumps({'event': 'failed', 'exit_code': 9, 'reason': OUT_OF_MEMORY_REASON})}\n"
    "launcher | worker-1:12345: received SIGTERM, stopping\n"
)


def test_a_saved_log_of_a_run_the_launcher_ended_gives_the_reason_its_status_gave(logs, tmp_path):
    logs[1].write_text(OUT_OF_MEMORY)
    results = tmp_path / "results"
    results.mkdir()
    for path, code, reason in zip(
        logs, (ExitCode.OK, ExitCode.OUT_OF_MEMORY), (None, OUT_OF_MEMORY_REASON), strict=True
    ):
        recorder = Recorder(WorkerFiles(results, path.stem))
        for line in path.read_text().splitlines(keepends=True):
            recorder.log_line(line)
        recorder.finish(code, **({"reason": reason} if reason else {}))
    live = verify("--results", results, "--workers", "worker-0,worker-1", "--timeout", "10")
    saved = verify("--exit-codes", "worker-0=0,worker-1=9", *logs)
    assert problems(saved) == problems(live) == [f"worker-1: exited 9: {OUT_OF_MEMORY_REASON}"]
    # An event of another exit code (an earlier run's, say) is no reason for this one.
    assert problems(verify("--exit-codes", "worker-0=0,worker-1=5", *logs)) == [
        "worker-1: exited 5: tensorflow.python.framework.errors_impl.UnavailableError: Collective ops is aborted "
        "by: failed to connect"
    ]


def test_a_live_verdict_fails_a_fault_asked_for_that_no_shaper_recorded(tmp_path):
    # Both workers trained the tutorial's run well, and no shaper recorded the fault the run asked
    # for: nothing says it was tested, and the run must not pass as if it had been.
    for index in (0, 1):
        recorder = Recorder(WorkerFiles(tmp_path, f"worker-{index}"))
        for line in (TUTORIAL / f"worker-{index}.log").read_text().splitlines(keepends=True):
            recorder.log_line(line)
        recorder.finish(ExitCode.OK)
    arguments = ("--results", tmp_path, "--workers", "worker-0,worker-1", "--timeout", "10")
    untold = verify(*arguments, TF_NETWORK_FAULTS="cut worker-1 at step 5 for 1s")
    assert untold.returncode == ExitCode.VERIFICATION_FAILED, untold.stdout
    assert problems(untold) == [
        "fault never recorded: cut worker-1 off at step 5 for 1s: no shaper of its workers said it injected it, "
        "or that the training ended first: the run did not test it"
    ]
    assert "fault: cut worker-1 off at step 5 for 1s: no shaper recorded it, injected or not" in untold.stdout
    # The negative control: no fault asked for, the same results pass.
    assert verify(*arguments).returncode == ExitCode.OK
    bad = verify(*arguments, TF_NETWORK_FAULTS="cut worker-7 at step 5 for 1s")
    assert bad.returncode == ExitCode.CONFIG_ERROR and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "verify: config error: `TF_NETWORK_FAULTS`: 'cut worker-7 at step 5 for 1s': no worker-7 in this cluster "
        "(worker-0, worker-1)"
    ], bad.stderr

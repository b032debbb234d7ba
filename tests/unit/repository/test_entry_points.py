"""The command lines: exit codes, one-line errors, no tracebacks. No Docker, no TensorFlow needed."""

import json
import os
import subprocess

import pytest

from tests.conftest import FIXTURES, ROOT, run_python
from trainer.contract.exitcodes import ExitCode
from trainer.contract.resultsdir import Recorder, WorkerFiles

LOGS = FIXTURES / "logs"


def test_the_host_verifier_reads_logs_relative_to_where_it_is_run():
    # scripts/verify needs only python3, and takes paths as the user gives them.
    result = subprocess.run(
        [str(ROOT / "scripts" / "verify"), "worker-0.log", "worker-1.log", "--exit-codes", "worker-0=0,worker-1=0"],
        cwd=LOGS / "tutorial",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == ExitCode.OK, result.stdout + result.stderr
    assert "verdict: PASS: 2 of 2 workers agree" in result.stdout


def test_the_host_verifier_run_in_a_project_with_a_trainer_package_of_its_own_is_the_harnesss(tmp_path):
    # `tfcluster verify` in your project's folder, where a `trainer` package is yours (Vertex AI's).
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "__init__.py").write_text("")
    logs = [str(LOGS / "tutorial" / name) for name in ("worker-0.log", "worker-1.log")]
    result = subprocess.run(
        [str(ROOT / "scripts" / "verify"), *logs, "--allow-unknown-exits"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == ExitCode.OK, result.stdout + result.stderr
    assert "verdict: PASS: 2 of 2 workers agree" in result.stdout


def test_verify_passes_the_tutorials_logs():
    logs = [str(LOGS / "tutorial/worker-0.log"), str(LOGS / "tutorial/worker-1.log")]
    for asked in (["--exit-codes", "worker-0=0,worker-1=0"], ["--allow-unknown-exits"]):
        result = run_python("-m", "trainer.verifier", *logs, *asked)
        assert result.returncode == ExitCode.OK, result.stdout + result.stderr
        assert (
            "verdict: PASS: 2 of 2 workers agree: replicas=2 initial_loss=0.7459 final_loss=0.4168 "
            "final_accuracy=0.8281" in result.stdout
        )


def test_saved_logs_whose_exit_is_unknown_fail_unless_asked_otherwise():
    # A saved log holds no exit status: agreeing metrics alone do not say the worker exited 0.
    result = run_python(
        "-m", "trainer.verifier", str(LOGS / "tutorial/worker-0.log"), str(LOGS / "tutorial/worker-1.log")
    )
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    assert (
        "  - worker-0: exit status unknown: give it (--exit-codes, --exit-codes-from), or pass --allow-unknown-exits"
        in result.stdout
    )


def test_two_logs_of_one_worker_are_refused(tmp_path):
    # The same log twice, or a copy under another name, would agree with itself.
    tutorial = LOGS / "tutorial"
    twice = run_python("-m", "trainer.verifier", str(tutorial / "worker-0.log"), str(tutorial / "worker-0.log"))
    assert twice.returncode == ExitCode.CONFIG_ERROR
    log = tutorial / "worker-0.log"
    assert twice.stderr == f"verify: config error: two logs for worker-0: {log} and {log} (one log per worker)\n"
    copy = tmp_path / "worker-1.log"
    copy.write_bytes((tutorial / "worker-0.log").read_bytes())
    copied = run_python("-m", "trainer.verifier", str(tutorial / "worker-0.log"), str(copy), "--allow-unknown-exits")
    assert copied.returncode == ExitCode.CONFIG_ERROR
    assert "are the same log, byte for byte: each worker's own log is needed" in copied.stderr
    assert copied.stdout == ""


def test_two_empty_logs_are_judged_as_logs_not_refused_as_one(tmp_path):
    # Workers that printed nothing: their logs are the same bytes without being the same log.
    for name in ("worker-0", "worker-1"):
        (tmp_path / f"{name}.log").write_text("")
    result = run_python(
        "-m",
        "trainer.verifier",
        str(tmp_path / "worker-0.log"),
        str(tmp_path / "worker-1.log"),
        "--allow-unknown-exits",
    )
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stderr
    assert result.stderr == ""
    assert "verdict: FAIL" in result.stdout


def test_verify_fails_differing_logs_naming_metric_and_workers(tmp_path):
    junit = tmp_path / "verdict.xml"
    result = run_python(
        "-m", "trainer.verifier", *sorted(map(str, (LOGS / "differ").glob("*.log"))), "--junit", str(junit)
    )
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    assert "final_loss differs: worker-0=0.4168 worker-1=0.4170" in result.stdout
    assert "final_loss differs" in junit.read_text()


def test_verify_json_output(tmp_path):
    result = run_python("-m", "trainer.verifier", "--json", *sorted(map(str, (LOGS / "differ").glob("*.log"))))
    record = json.loads(result.stdout)
    assert record["event"] == "verdict" and record["passed"] is False


def test_verify_expects_the_clusters_workers():
    env = {**os.environ, "TF_WORKER_HOSTS": "worker-0,worker-1,worker-2"}
    result = run_python(
        "-m", "trainer.verifier", str(LOGS / "tutorial/worker-0.log"), str(LOGS / "tutorial/worker-1.log"), env=env
    )
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    assert "only 2 of 3 expected workers reported" in result.stdout
    assert "replicas=2, expected 3" in result.stdout


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["nowhere.log"], "verify: config error: no such log file: nowhere.log"),
        (["--results", "/tmp"], "--results needs the expected workers"),
        (["--results", "/tmp", "--workers", "a,,b"], "('a,,b') has an empty entry"),
        (["--timeout", "0", "x.log"], "--timeout (0.0) must be positive"),
        ([], "give either --results DIR or log files"),
    ],
)
def test_verify_bad_arguments(arguments, message):
    env = {key: value for key, value in os.environ.items() if key != "TF_WORKER_HOSTS"}
    result = run_python("-m", "trainer.verifier", *arguments, env=env)
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("module", ["trainer.training", "trainer.launcher"])
@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"TF_CONFIG": "{oops"}, "TF_CONFIG is not valid JSON"),
        ({"TF_WORKER_HOSTS": "worker-0,worker-1", "TF_TASK_INDEX": "2"}, "`TF_TASK_INDEX` (2) must be in [0, 2)"),
        ({"TF_WORKER_HOSTS": "worker-0,worker-0", "TF_TASK_INDEX": "0"}, "`worker-0:12345` appears twice"),
    ],
)
def test_config_errors_are_one_line_with_the_config_exit_code(module, variables, message):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TF_", "TRAIN_"))}
    result = run_python("-m", module, env={**env, **variables})
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert result.stderr.startswith("trainer: config error: ")


def test_trainer_rejects_a_bad_training_setting():
    env = {"PATH": os.environ["PATH"], "TF_WORKER_HOSTS": "worker-0", "TF_TASK_INDEX": "0", "TRAIN_EPOCHS": "x"}
    result = run_python("-m", "trainer.training", env=env)
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stderr == "trainer: config error: `TRAIN_EPOCHS` ('x') must be an integer\n"
    # The same failure for programs: one JSON event on stdout, its reason the line on stderr.
    assert result.stdout.count("\n") == 1, result.stdout
    assert json.loads(result.stdout) == {
        "event": "failed",
        "exit_code": ExitCode.CONFIG_ERROR,
        "reason": "trainer: config error: `TRAIN_EPOCHS` ('x') must be an integer",
    }


def test_verify_names_a_failed_worker_by_its_statuss_reason_over_the_words_of_its_log(tmp_path):
    reason = "lost peer(s) worker-0:12345 (no heartbeat for 10s): training program exited 1"
    workers = [
        ("worker-0", ExitCode.OK, (LOGS / "tutorial/worker-0.log").read_text().splitlines(), {}),
        (
            "worker-1",
            ExitCode.PEER_LOST,
            ["train | epoch:   1/3", "tensorflow.python.framework.errors_impl.UnavailableError: socket closed"],
            {"reason": reason},
        ),
    ]
    for name, exit_code, lines, details in workers:
        recorder = Recorder(WorkerFiles(tmp_path, name))
        for line in lines:
            recorder.log_line(line + "\n")
        recorder.finish(exit_code, **details)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TF_", "TRAIN_"))}
    result = run_python(
        "-m",
        "trainer.verifier",
        "--results",
        str(tmp_path),
        "--workers",
        "worker-0,worker-1",
        "--timeout",
        "10",
        env=env,
    )
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout + result.stderr
    assert f"  - worker-1: exited 5: {reason}\n" in result.stdout
    assert "UnavailableError" not in result.stdout


@pytest.mark.parametrize("size", ["0", "x", "1.5"])
def test_allreduce_names_a_bad_size_in_one_line(size):
    env = {"PATH": os.environ["PATH"], "TF_WORKER_HOSTS": "worker-0", "TF_TASK_INDEX": "0"}
    result = run_python("-m", "trainer.benchmark.allreduce", "16", size, env=env)
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stderr == f"allreduce: config error: a size must be a whole number of MiB, at least 1, got '{size}'\n"


@pytest.mark.parametrize(
    ("arguments", "variables", "message"),
    [
        (["--workers", "0"], {}, "run: --workers must be a whole number from 1 to 16, got '0'"),
        (["--workers"], {}, "run: --workers needs a number"),
        (
            ["--name", "My_Run"],
            {},
            "run: --name 'My_Run' is not a Compose project name: lower-case letters, digits, - and _",
        ),
        (["--name"], {}, "run: --name needs a Compose project name"),
        (
            [],
            {"COMPOSE_PROJECT_NAME": "Bad Name"},
            "run: COMPOSE_PROJECT_NAME='Bad Name': a Compose project name is lower-case letters, digits, - and _",
        ),
        (
            ["--bogus"],
            {},
            "run: unknown argument '--bogus' "
            "(usage: scripts/run [-h] [--workers N] [--recover] [--network PROFILE] [--fault CLAUSE] "
            "[--link CLAUSE] [--chief] [--slow NAME=CPUS] "
            "[--dev] [--warm] [--warm-down] [--project DIR] [--command CMD] [--data DIR] [--env NAME=VALUE] "
            "[--env-file FILE] [--requirements FILE] [--bake] [--tag NAME] [--junit FILE] [--report FILE] "
            "[--name NAME] "
            "[--dry-run])",
        ),
        ([], {"TRAINER_SCRIPT": "no/such/train.py"}, "run: TRAINER_SCRIPT 'no/such/train.py' is not a file"),
        (["--project", "no/such/project"], {}, "run: --project 'no/such/project' is not a folder"),
        (
            ["--project", "examples/tutorial"],
            {},
            "run: --project 'examples/tutorial' has no train.py: give --command",
        ),
        (
            [
                "--project",
                "examples/tutorial",
                "--command",
                "python multiworker_train.py",
                "--env",
                "TF_CONFIG={}",
            ],
            {},
            "run: --env TF_CONFIG is set by the harness on every worker, not by you (docs/bring-your-own.md)",
        ),
    ],
)
def test_run_refuses_bad_input_in_one_line_before_setting_anything_up(arguments, variables, message):
    # Refused before scripts/setup: no Docker is touched, nothing is built.
    result = subprocess.run(
        [str(ROOT / "scripts" / "run"), *arguments],
        cwd=ROOT,
        env={**os.environ, **variables},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stderr == message + "\n"
    assert result.stdout == ""

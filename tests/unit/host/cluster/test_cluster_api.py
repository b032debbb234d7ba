"""The Python API (tfcluster.Cluster), driven with a recorded stand-in for Docker: it plans, runs,
reads the verdict back as data; the dry run and the run come from one list of steps."""

import subprocess
from pathlib import Path

import pytest
from tfcluster import Cluster, Refusal
from tfcluster.cluster import cancel, runs, steps
from tfcluster.report import engine

from tests.conftest import ROOT
from tests.unit.host.conftest import TUTORIAL_LOGS, begun_at_once, verifier_log

REAL_RUN = subprocess.run


class Docker:
    """Stands in for every Docker and Compose command (and scripts/setup): records it, answers
    `logs` from the tutorial's saved logs (the verifier's, its verdict on them), and lets anything
    else really run."""

    def __init__(self, codes: dict[str, int] | None = None, exits: dict[str, int] | None = None):
        self.codes = codes or {}
        self.exits = exits or {"worker-0": 0, "worker-1": 0}
        self.commands: list[tuple[str, ...]] = []

    def __call__(self, command, **options):
        command = [str(word) for word in command]
        if command[0].endswith("scripts/setup"):
            self.commands.append(("scripts/setup", *command[1:]))
            return subprocess.CompletedProcess(command, self.codes.get("setup", 0))
        if command[0] != "docker":
            return REAL_RUN(command, **options)
        self.commands.append(tuple(command))
        verb = command[2] if command[1] == "compose" else command[1]
        stdout = ""
        if verb == "logs" and command[-1] == "verifier":
            stdout = verifier_log(self.exits)
        elif verb == "logs":
            stdout = (TUTORIAL_LOGS / f"{command[-1]}.log").read_text()
        return subprocess.CompletedProcess(command, self.codes.get(verb, 0), stdout=stdout, stderr="")

    def verbs(self) -> list[str]:
        return [command[0] if command[0] == "scripts/setup" else command[2] for command in self.commands]


@pytest.fixture
def docker(monkeypatch):
    def start(**answers) -> Docker:
        stand_in = Docker(**answers)
        monkeypatch.setattr(subprocess, "run", stand_in)
        # The children a run can cancel (set-up, `up`: tfcluster/cluster/cancel.py) too.
        monkeypatch.setattr(cancel, "run", stand_in)
        monkeypatch.setattr(runs, "foreign_checkouts", lambda _name, _root: [])
        # An earlier run's containers left, a worker still running: `down` and `stop` both run
        # (when they do not: tests/unit/host/cluster/test_run_steps.py).
        monkeypatch.setattr(steps, "of_project", lambda _kind, _name: True)
        monkeypatch.setattr(steps, "ended_within", lambda _name, _seconds: False)  # So that `stop` runs.
        begun_at_once(monkeypatch)
        # The report's reading of the containers is tests/unit/host/report/'s.
        monkeypatch.setattr(engine, "containers", lambda _project: {})
        return stand_in

    # This machine may itself be a container: the bind-mount check is another test's.
    monkeypatch.setattr(steps.hostpaths, "in_container", lambda _environment: False)
    return start


def test_a_run_returns_the_verdict_as_data(docker):
    recorded = docker()
    run = Cluster(environ={"PATH": "/usr/bin:/bin"}).run()
    assert recorded.verbs() == ["down", "scripts/setup", "up", "stop", "logs", "logs", "logs"]
    assert (run.status, run.passed, run.ran) == (0, True, True)
    assert run.report.endswith(".tfcluster/runs/tfcluster/report.html") and Path(run.report).is_file()
    assert list(run.workers) == ["worker-0", "worker-1"]
    assert run.workers["worker-0"].status == "exited 0"
    assert run.workers["worker-1"].metrics["replicas"] == 2
    assert run.problems == []
    assert run.verdict["synchronization"]["proven"]  # The state and traffic lines of a PASS.
    assert "worker-0" in run.logs and run.logs["worker-0"].strip()


def test_a_failed_verdict_names_the_worker_and_its_problem(docker):
    docker(codes={"up": 7}, exits={"worker-0": 0, "worker-1": 3})
    run = Cluster(environ={}).run()
    assert (run.status, run.passed) == (7, False)
    assert "exited 3" in run.workers["worker-1"].problem
    assert any(problem.startswith("worker-1: ") for problem in run.problems)


def test_a_failed_setup_ends_the_run_before_compose_with_nothing_to_judge(docker):
    recorded = docker(codes={"setup": 2})
    run = Cluster(environ={}).run()
    assert recorded.verbs() == ["down", "scripts/setup"]  # The last run's, begun with the set-up.
    assert (run.status, run.ran, run.verdict, run.workers) == (2, False, None, {})


def test_bad_input_is_refused_before_anything_is_done(docker):
    recorded = docker()
    with pytest.raises(Refusal, match="--network 'moon' is not a profile"):
        Cluster(network="moon", environ={}).run()
    with pytest.raises(Refusal, match="workers=17: the number of workers"):
        Cluster(workers=17, environ={}).run()
    with pytest.raises(Refusal, match="--slow worker-5: no such worker"):
        Cluster(slow={"worker-5": 0.5}, environ={}).run()
    with pytest.raises(Refusal, match="--env goes with --project"):
        Cluster(env={"A": "1"}, environ={}).run()
    assert recorded.commands == []


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"workers": "3"}, "workers='3'"),
        ({"workers": True}, "workers=True"),
        ({"workers": 2.5}, "workers=2.5"),
        ({"slow": "worker-1=0.25"}, "slow='worker-1=0.25'"),
        ({"slow": {"worker-1": "0.5,worker-0=0.1"}}, "slow={"),
        ({"env": "A=1", "project": "."}, "env='A=1'"),
        ({"env_files": "cluster.env", "project": "."}, "env_files='cluster.env'"),
        ({"name": "My Run"}, "name='My Run'"),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused_naming_it(docker, settings, named):
    # What argparse checks on the command line, the API checks itself: one line, nothing done.
    recorded = docker()
    with pytest.raises(Refusal) as refused:
        Cluster(environ={}, **settings).run()
    assert str(refused.value).startswith(named), refused.value
    assert recorded.commands == []


def test_the_refusals_come_in_the_command_lines_order(tmp_path):
    # TRAINER_SCRIPT is checked before --tag, as scripts/run always did.
    with pytest.raises(Refusal, match="TRAINER_SCRIPT 'nope.py' is not a file"):
        Cluster(tag="x", environ={"TRAINER_SCRIPT": "nope.py"}).plan()


def test_each_problem_is_named_once_and_a_run_without_a_verdict_says_how_it_ended(docker):
    docker(codes={"up": 7}, exits={"worker-0": 0, "worker-1": 3})
    run = Cluster(environ={}).run()
    assert len(run.problems) == len(set(run.problems)) == 1, run.problems
    docker(codes={"setup": 2})
    ended = Cluster(environ={}).run()
    assert ended.problems == ["the run ended with exit status 2 before the verifier gave a verdict"]


def test_down_needs_no_valid_plan(docker, tmp_path):
    project = tmp_path / "gone"
    project.mkdir()
    (project / "train.py").write_text("")
    cluster = Cluster(project=str(project), bake=True, name="tfc-test-gone", environ={})
    project.joinpath("train.py").unlink()
    project.rmdir()
    recorded = docker()
    assert cluster.down() == 0
    (down,) = recorded.commands
    assert down[2:] == ("down", "--volumes", "--remove-orphans", "--timeout", "1")


def test_a_run_from_another_thread_sets_no_signal_handler(docker):
    import threading

    docker()
    runs = []
    worker = threading.Thread(target=lambda: runs.append(Cluster(junit=None, environ={}).run()))
    worker.start()
    worker.join(timeout=60)
    assert runs and runs[0].passed


def test_a_step_added_to_the_plan_is_both_printed_by_the_dry_run_and_run(docker, monkeypatch):
    ran = []

    class Marker:
        def lines(self, _plan, _environ):
            return ["echo marker"]

        def run(self, _execution):
            ran.append("marker")

    planned = steps.of
    monkeypatch.setattr(steps, "of", lambda plan: [*planned(plan)[:3], Marker(), *planned(plan)[3:]])
    recorded = docker()
    text = Cluster(environ={}).describe()
    commands = text.split("commands, from the project's root, with the COMPOSE_FILE above:\n")[1]
    # The API's run reads its verdict back, and its dry run says so.
    assert "docker compose logs --no-color --no-log-prefix SERVICE, each of verifier worker-0 worker-1" in commands
    down = "docker compose down --volumes --remove-orphans --timeout 1 (unless nothing left)"
    assert commands.splitlines()[:5] == [
        f"  {down}, in the background",
        "  scripts/setup --image-id-file .tfcluster/runs/tfcluster/image",
        "  echo marker",
        f"  wait for: {down}",
        "  docker ps --all --filter label=com.docker.compose.project=tfcluster (no other checkout's, again)",
    ]
    assert recorded.commands == []  # The dry run calls nothing.
    Cluster(environ={}).run()
    assert ran == ["marker"]
    assert recorded.verbs()[:3] == ["down", "scripts/setup", "up"]


def test_the_dry_run_prints_the_bind_mount_check_that_the_run_makes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    text = Cluster(environ={"TRAINER_SCRIPT": str(script)}).describe()
    assert f"that the engine sees TRAINER_SCRIPT {script}" in text


def test_down_never_ends_a_cluster_a_live_run_holds(docker, tmp_path, monkeypatch, capsys):
    recorded = docker()
    monkeypatch.setattr(steps.paths, "ROOT", tmp_path)
    (tmp_path / "compose.yaml").write_text((ROOT / "compose.yaml").read_text())  # Its default name, as Compose's.
    live = runs.claim(tmp_path, "theirs", given=True, foreign=lambda _name, _root: [])
    try:
        assert Cluster(name="theirs", environ={}).down() == 1
    finally:
        live.release()
    assert "down" not in [command[2] for command in recorded.commands if command[0] == "docker"]
    assert "the Compose project theirs belongs to a run still going" in capsys.readouterr().err

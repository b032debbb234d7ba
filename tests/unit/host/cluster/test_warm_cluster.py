"""scripts/run --warm's host side (tfcluster/cluster/warm.py): the warm file, the cluster's key, the execs."""

import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tfcluster import Cluster
from tfcluster.cluster import steps, warm
from tfcluster.commands import run
from tfcluster.errors import Refusal

CONFIG = {
    "services": {
        "worker-0": {
            "image": "tfcluster:latest",
            "command": ["python", "train.py"],
            "environment": {"TF_TASK_INDEX": "0", "TRAIN_EPOCHS": "3", "TF_CHECKPOINT_DIR": "/checkpoints"},
            "working_dir": "/project",
            "volumes": [{"type": "bind", "source": "/home/me/model", "target": "/project"}],
        },
        "verifier": {
            "image": "tfcluster:latest",
            "entrypoint": ["python", "-m", "trainer.verifier"],
            "command": ["--results", "/results"],
            "environment": {"TF_WORKER_HOSTS": "worker-0"},
        },
    },
    "volumes": {"results": {}},
    "networks": {"cluster": {"internal": True}},
}
IMAGE = {"Id": "sha256:abc", "Config": {"Entrypoint": ["python", "-P", "-m", "trainer.launcher", "--"], "Cmd": []}}


def changed(**services) -> dict:
    config = json.loads(json.dumps(CONFIG))
    for name, fields in services.items():
        config["services"][name].update(fields)
    return config


def test_the_warm_file_makes_each_worker_a_zygote_with_its_key_and_the_verifier_idle():
    text = warm.render({"worker-0": {"TF_USE_LEGACY_KERAS": "1"}, "worker-1": {}}, "k3y")
    assert 'entrypoint: !override ["python", "-P", "-m", "trainer.zygote"]' in text
    assert 'environment: !override {"TF_USE_LEGACY_KERAS": "1"}' in text
    assert "environment: !override {}" in text  # worker-1: no key variable set.
    assert text.count('labels: ["tfcluster.warm=k3y"]') == 3
    assert f"entrypoint: !override {json.dumps(warm.IDLE)}" in text
    # With --network, every shaper idles too (its image has python3 alone), and is exec'd by each run.
    shaped = warm.render({"worker-0": {}, "worker-1": {}}, "k3y", ["shaper-0", "shaper-1"])
    assert shaped.count('labels: ["tfcluster.warm=k3y"]') == 5
    assert shaped.count(f"entrypoint: !override {json.dumps(['python3', *warm.IDLE[1:]])}") == 2
    assert warm._shapers(
        {"services": {"worker-0": {}, "shaper-0": {"labels": {"tfcluster.role": "shaper"}}, "verifier": {"labels": {}}}}
    ) == ["shaper-0"]


def test_the_key_is_the_configuration_but_each_runs_own_part_and_the_image():
    key = warm._key(CONFIG, IMAGE["Id"])
    # A run's environment and command are its own (docker exec passes them): same cluster.
    assert warm._key(changed(**{"worker-0": {"environment": {"TRAIN_EPOCHS": "9"}}}), IMAGE["Id"]) == key
    assert warm._key(changed(**{"worker-0": {"command": ["python", "other.py"]}}), IMAGE["Id"]) == key
    # Another project folder, or a rebuilt image: another cluster.
    other_folder = changed(
        **{"worker-0": {"volumes": [{"type": "bind", "source": "/elsewhere", "target": "/project"}]}}
    )
    assert warm._key(other_folder, IMAGE["Id"]) != key
    assert warm._key(CONFIG, "sha256:rebuilt") != key


def test_a_mounted_folder_made_again_at_the_same_path_is_another_cluster(tmp_path):
    # The warm containers' bind mount holds the folder it was made from: removed and made again
    # (a fresh clone, a copy), the same path is another folder, and every exec into the old mount
    # failed ("current working directory is outside of container mount namespace root").
    folder = tmp_path / "model"
    folder.mkdir()
    config = changed(**{"worker-0": {"volumes": [{"type": "bind", "source": str(folder), "target": "/project"}]}})
    key = warm._key(config, IMAGE["Id"])
    assert warm._key(config, IMAGE["Id"]) == key  # The same folder: the same cluster.
    (folder / "train.py").write_text("print('an edit')\n")
    assert warm._key(config, IMAGE["Id"]) == key  # An edit inside it is a run's own.
    kept = tmp_path / "kept"  # Still there, so that the new folder cannot take the old one's number.
    folder.rename(kept)
    folder.mkdir()
    assert warm._key(config, IMAGE["Id"]) != key


def test_each_service_is_execd_with_its_environment_by_name_and_a_folder_of_the_run(monkeypatch):
    started = []

    class Recorded:
        def __init__(self, command, **options):
            started.append((command, options))

    monkeypatch.setattr(warm.subprocess, "Popen", Recorded)
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    cluster = warm.WarmCluster({"COMPOSE_FILE": "compose.yaml", "COMPOSE_PROJECT_NAME": "mine"}, ["worker-0"])
    config = changed(
        **{"worker-0": {"environment": {**CONFIG["services"]["worker-0"]["environment"], "DOCKER_X": "1"}}}
    )
    services = cluster._services(config, IMAGE)
    execs = warm._Exec(cluster, services, "r1", collects=False)
    for service in services:
        execs._start(service, "/results/runs/r1")
    (worker, worker_options), (verifier, _) = started
    assert worker[:2] == ["docker", "exec"]
    assert worker[worker.index("mine-warm-worker-0-1") :] == [
        "mine-warm-worker-0-1",
        *IMAGE["Config"]["Entrypoint"],
        "python",
        "train.py",
    ]
    # Values reach the CLI through its environment, never its command line; but the CLI's own names.
    assert "TRAIN_EPOCHS" in worker and not any("TRAIN_EPOCHS=" in word for word in worker)
    assert worker_options["env"]["TRAIN_EPOCHS"] == "3"
    assert "DOCKER_X=1" in worker and worker_options["env"]["DOCKER_HOST"] == "unix:///var/run/docker.sock"
    assert worker_options["env"]["TF_RESULTS_DIR"] == "/results/runs/r1"
    assert worker_options["env"]["TF_CHECKPOINT_DIR"] == "/checkpoints/runs/r1"
    assert worker_options["env"]["TFCLUSTER_WARM"] == "1"
    assert worker[worker.index("--workdir") + 1] == "/project"
    assert verifier[-4:] == ["-m", "trainer.verifier", "--results", "/results/runs/r1"]


def test_a_warm_runs_lines_are_prefixed_as_composes_so_they_read_as_a_cold_runs(capsys):
    cluster = warm.WarmCluster({"COMPOSE_FILE": "compose.yaml", "COMPOSE_PROJECT_NAME": "mine"}, ["worker-0"])
    execs = warm._Exec(cluster, cluster._services(CONFIG, IMAGE), "r1", collects=False)
    for name, said in [("worker-0", "train | epoch 1\n"), ("verifier", "verdict: PASS\n")]:
        execs._forward(name, subprocess.Popen(["printf", said], stdout=subprocess.PIPE, text=True))
    # `docker compose up`'s own prefix: the container's name without the project's, padded alike.
    assert capsys.readouterr().out == "worker-0-1  | train | epoch 1\nverifier-1  | verdict: PASS\n"


def test_a_warm_cluster_is_brought_up_again_when_missing_stopped_or_of_another_key(monkeypatch):
    def inspected(*things):
        def fake_run(command, **_options):
            assert command[:2] == ["docker", "inspect"]
            return subprocess.CompletedProcess(command, 1, json.dumps(list(things)), "")

        monkeypatch.setattr(warm.subprocess, "run", fake_run)
        return warm._inspected(["tfcluster:latest", *containers])

    def container(name, *, key="k", running=True):
        return {
            "Name": f"/tfcluster-warm-{name}-1",
            "Config": {"Labels": {warm.LABEL: key}},
            "State": {"Running": running},
        }

    containers = ["tfcluster-warm-worker-0-1", "tfcluster-warm-verifier-1"]
    image = {"Id": "sha256:abc", "RepoTags": ["tfcluster:latest"], "Config": {}}
    assert warm.stale("k", containers, inspected(image)) == "none is up"
    assert warm.stale("k", containers, inspected(container("worker-0"))) == "tfcluster-warm-verifier-1 is missing"
    changed = inspected(container("worker-0", key="old"), container("verifier"))
    assert (
        warm.stale("k", containers, changed) == "its configuration, image or mounted folders changed since it came up"
    )
    stopped = inspected(container("worker-0", running=False), container("verifier"))
    assert warm.stale("k", containers, stopped) == "tfcluster-warm-worker-0-1 is not running"
    up = inspected(image, container("worker-0"), container("verifier"))
    assert warm.stale("k", containers, up) is None
    # The image is found by its id and by each of its names, its default tag too; a missing one is not.
    assert warm._image_in(up, "sha256:abc") == image == warm._image_in(up, "tfcluster")
    assert warm._image_in(up, "tfcluster:2") is None and warm._image_in(up, "registry:5000/tfcluster") is None
    # With --network, each worker's shaper is part of it too.
    assert warm.stale("k", [*containers, "tfcluster-warm-shaper-0-1"], up) == "tfcluster-warm-shaper-0-1 is missing"


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"recover": True}, "--warm and --recover do not go together"),
    ],
)
def test_what_warm_workers_cannot_go_with_is_refused_before_anything_starts(settings, refusal):
    with pytest.raises(Refusal, match=refusal):
        Cluster(warm=True, **settings).plan()


def test_a_warm_run_execs_on_the_warm_cluster_instead_of_down_up_stop():
    plan = Cluster(warm=True, junit="verdict.xml").plan()
    kinds = [type(step).__name__ for step in steps.of(plan)]
    assert kinds == ["WriteFiles", "SetUp", "WarmRun", "ReadVerdict", "Report"]
    assert warm.project_name({}) == "tfcluster-warm"
    assert warm.project_name({"COMPOSE_PROJECT_NAME": "mine"}) == "mine-warm"


def test_warm_down_takes_the_runs_own_warm_cluster_down(monkeypatch):
    taken_down = []
    monkeypatch.setattr(warm.WarmCluster, "down", lambda self: taken_down.append(self.name) or 0)
    assert run.main(["--warm-down"], {"COMPOSE_PROJECT_NAME": "mine"}) == 0
    assert taken_down == ["mine-warm"]


@pytest.mark.parametrize(("status", "left"), [(0, False), (1, True)])
def test_warm_down_removes_its_files_in_the_checkout_once_the_cluster_is_gone(tmp_path, monkeypatch, status, left):
    folder = tmp_path / ".tfcluster" / "mine-warm"
    folder.mkdir(parents=True)
    for name in (Path(warm.WARM_FILE).name, "config.json", "lock"):
        (folder / name).write_text("{}")
    downs = []

    def compose(self, *arguments, **_options):
        downs.append(arguments)
        return subprocess.CompletedProcess(arguments, status, "", "" if status == 0 else "no engine")

    monkeypatch.setattr(warm.ComposeProject, "compose", compose)
    cluster = warm.WarmCluster(
        {"COMPOSE_FILE": "compose.yaml", "COMPOSE_PROJECT_NAME": "mine"}, ["worker-0"], root=tmp_path
    )
    assert cluster.down() == status
    assert downs == [("down", "--volumes", "--remove-orphans", "--timeout", "5")]
    # A failed `down` keeps the warm file: the cluster may still be up, and a second `down` needs it.
    assert folder.exists() is left
    assert (tmp_path / ".tfcluster").is_dir()  # Other runs' files are not this one's to take.


def test_a_warm_run_whose_reader_is_gone_keeps_forwarding_every_line_for_its_verdict(monkeypatch):
    # `scripts/run --warm | head`. Before, the thread died at its first line: the launcher's next
    # lines were never read (a chatty program blocked on the full pipe) nor kept for the verdict.
    read, write = os.pipe()
    os.close(read)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(os.fdopen(write, "wb")))
    cluster = warm.WarmCluster({"COMPOSE_FILE": "compose.yaml", "COMPOSE_PROJECT_NAME": "mine"}, ["worker-0"])
    execs = warm._Exec(cluster, cluster._services(CONFIG, IMAGE), "r1", collects=False)
    program = "for step in range(20_000): print('train | step', step)\nprint('verdict: PASS')"
    execs._forward("verifier", subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True))
    kept = [line for _, line in execs._lines["verifier"]]
    assert len(kept) == 20_001 and kept[-1] == "verdict: PASS\n"
    assert os.readlink(f"/proc/self/fd/{write}") == "/dev/null"


def test_a_signal_after_the_warm_verdict_fails_the_run_and_keeps_the_verdict(monkeypatch, capsys):
    # SIGTERM while a worker's launcher ends after the verdict. Before, it was noted and dropped:
    # a cancelled CI job's step passed. Now as a cold run's (api._cancelled_late).
    cluster = warm.WarmCluster({"COMPOSE_FILE": "compose.yaml", "COMPOSE_PROJECT_NAME": "mine"}, ["worker-0"])
    execs = warm._Exec(cluster, cluster._services(CONFIG, IMAGE), "r1", collects=False)
    programs = {"worker-0": "import time; time.sleep(1.5)", "verifier": "print('verdict: PASS')"}

    def start(service, _results):
        command = [sys.executable, "-c", programs[service.name]]
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    monkeypatch.setattr(execs, "_start", start)
    threading.Timer(0.7, os.kill, (os.getpid(), signal.SIGTERM)).start()
    outcome = execs.run()
    assert outcome.status == 143
    assert outcome.verifier_lines == ["verdict: PASS\n"]
    assert (
        "received SIGTERM as the run ended: its verdict stands in the report, the run fails" in capsys.readouterr().err
    )

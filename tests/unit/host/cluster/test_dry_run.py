"""`scripts/run --dry-run`: what a run would do, shown without doing it; the mounts and CPU limits a run plans."""

import os
import re

import pytest
import yaml
from tfcluster import paths
from tfcluster.ci import hostpaths
from tfcluster.cluster import plan as run_plan
from tfcluster.cluster import scaling
from tfcluster.project.options import Project

from tests.unit.host.conftest import DOWN, DOWN_BEGUN, UP
from trainer.contract.exitcodes import ExitCode

# The run's own folder, for the default project (tfcluster/cluster/runs.py).
RUN = ".tfcluster/runs/tfcluster"


def test_the_dry_run_with_a_network_profile_sets_up_the_shaper_too(sandbox):
    result = sandbox.run("scripts/run", "--dry-run", "--network", "wan")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "set-up         scripts/setup --shaper --image-id-file .tfcluster/runs/tfcluster/image: " in text
    assert "a build of tfcluster:latest (worker-0) and tfcluster-shaper:latest (shaper-0), unless current\n" in text
    assert "  scripts/setup --shaper --image-id-file .tfcluster/runs/tfcluster/image\n" in text


def test_the_dry_run_of_the_default_cluster(sandbox):
    result = sandbox.run("scripts/run", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    text = result.stdout
    assert "compose files  compose.yaml (COMPOSE_FILE)\n" in text
    assert (
        "project        tfcluster (COMPOSE_PROJECT_NAME, else compose.yaml's; "
        "tfcluster-2, -3... while another run holds it), "
        f"its files in {RUN}/\n" in text
    )
    # Without a network profile the shaper's image is neither needed nor built.
    assert "a build of tfcluster:latest (worker-0), unless current\n" in text
    assert "tfcluster-shaper" not in text
    assert re.search(r"^  worker-0 +0 +worker-0,worker-1$", text, re.MULTILINE)
    assert re.search(r"^  worker-1 +1 +worker-0,worker-1$", text, re.MULTILINE)
    assert "  TRAIN_EPOCHS=3\n" in text and "  TF_JOIN_TIMEOUT=60\n" in text
    # Exactly the commands of a real run, in order.
    down = "docker compose down --volumes --remove-orphans --timeout 1 (unless nothing left)"
    assert (
        f"  {down}, in the background\n"
        "  scripts/setup --image-id-file .tfcluster/runs/tfcluster/image\n"
        f"  wait for: {down}\n"
        "  docker ps --all --filter label=com.docker.compose.project=tfcluster (no other checkout's, again)\n"
        "  docker compose up --remove-orphans --attach-dependencies --exit-code-from verifier verifier\n"
        "  docker compose stop --timeout 5 (unless nothing running, or all end within 1 s)\n"
    ) in text
    assert "COMPOSE_FILE=compose.yaml COMPOSE_PROJECT_NAME=tfcluster docker compose config" in text
    sandbox.assert_untouched()


def test_the_dry_run_of_three_workers_with_recovery(sandbox):
    result = sandbox.run("scripts/run", "--workers", "3", "--recover", "--dry-run")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert f"compose files  compose.yaml:{RUN}/compose.workers.yaml:compose.recovery.yaml (COMPOSE_FILE)\n" in text
    assert "rendered       .tfcluster/runs/tfcluster/compose.workers.yaml, by scripts/workers.py 3\n" in text
    for index in range(3):
        assert re.search(rf"^  worker-{index} +{index} +worker-0,worker-1,worker-2$", text, re.MULTILINE)
    assert "(TF_RESTART_LIMIT=3, compose.recovery.yaml)" in text
    assert "worker-0, worker-1, worker-2, the keeper" in text
    assert f"  write {RUN}/compose.workers.yaml\n  {DOWN_BEGUN}\n  scripts/setup --image-id-file {RUN}/image\n" in text
    # A dry run writes nothing, compose.workers.yaml included.
    sandbox.assert_untouched()


def test_the_dry_run_shows_your_settings_script_and_profile(sandbox, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "train.py").write_text("print('training')\n")
    result = sandbox.run(
        "scripts/run",
        "--network",
        "wan",
        "--dry-run",
        cwd=elsewhere,
        TRAINER_SCRIPT="train.py",
        TRAIN_EPOCHS="5",
        COMPOSE_PROJECT_NAME="tfc-mine",
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "compose files  compose.yaml:compose.byo.yaml:compose.network.yaml (COMPOSE_FILE)\n" in text
    assert (
        "project        tfc-mine (COMPOSE_PROJECT_NAME, else compose.yaml's; "
        "tfc-mine-2, -3... while another run holds it), "
        "its files in .tfcluster/runs/tfc-mine/\n" in text
    )
    # The script's path is taken from where the user is, and made absolute for Compose.
    assert f"trainer        {elsewhere.resolve() / 'train.py'}, read-only at /user/train.py" in text
    assert "network        profile wan, applied and measured by shaper-0, shaper-1\n" in text
    assert "  TRAIN_EPOCHS=5\n" in text and "  TF_NETWORK_PROFILE=wan\n" in text
    sandbox.assert_untouched()


def test_the_dry_run_of_one_worker_shows_its_own_pass_mark(sandbox):
    text = sandbox.run("scripts/run", "--workers", "1", "--dry-run").stdout
    assert re.search(r"^  worker-0 +0 +worker-0$", text, re.MULTILINE)
    assert f"  TRAIN_MIN_ACCURACY={scaling.SINGLE_WORKER_MIN_ACCURACY}\n" in text


def test_the_dry_run_shows_each_workers_cpus_and_the_slowed_ones(sandbox):
    text = sandbox.run("scripts/run", "--dry-run").stdout
    assert "cpus           every worker: 2 (TF_WORKER_CPUS); --slow NAME=CPUS limits one\n" in text
    arguments = ["--workers", "3", "--slow", "worker-2=.5", "--slow", "worker-0=1.0", "--dry-run"]
    result = sandbox.run("scripts/run", *arguments, TF_WORKER_CPUS="1.5")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("scripts/run --workers 3 --slow worker-2=0.5,worker-0=1 --dry-run: what it would do")
    assert f"compose files  compose.yaml:{RUN}/compose.workers.yaml:{RUN}/compose.slow.yaml (COMPOSE_FILE)\n" in text
    assert (
        "cpus           worker-2: 0.5, worker-0: 1 (--slow, .tfcluster/runs/tfcluster/compose.slow.yaml); "
        "every other worker: 1.5 (TF_WORKER_CPUS)\n"
    ) in text
    assert (
        f"  write {RUN}/compose.workers.yaml\n  write {RUN}/compose.slow.yaml\n  {DOWN_BEGUN}\n"
        f"  scripts/setup --image-id-file {RUN}/image\n" in text
    )
    sandbox.assert_untouched()


def test_the_slowed_limits_are_one_override_named_last(recorded, tmp_path):
    status, recorder = recorded(["--slow", "worker-1=0.25,worker-0=1.5", "--network", "lan"])
    assert status == 0
    assert recorder.commands[2][0] == UP
    assert recorder.commands[2][1]["env"]["COMPOSE_FILE"] == (
        "compose.yaml:compose.network.yaml:.tfcluster/runs/tfcluster/compose.slow.yaml"
    )
    assert (tmp_path / ".tfcluster/runs/tfcluster/compose.slow.yaml").read_text() == (
        "# Written by `scripts/run --slow worker-1=0.25,worker-0=1.5`: each named worker's CPU limit. Do not edit.\n"
        "services:\n  worker-1:\n    cpus: 0.25\n  worker-0:\n    cpus: 1.5\n"
    )


def test_the_dry_run_of_the_development_mode_names_the_mount_and_the_set_up(sandbox):
    result = sandbox.run("scripts/run", "--workers", "3", "--recover", "--dev", "--dry-run")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("scripts/run --workers 3 --recover --dev --dry-run: what it would do")
    assert (
        f"compose files  compose.yaml:{RUN}/compose.workers.yaml:compose.recovery.yaml:{RUN}/compose.dev.yaml"
    ) in text
    assert (
        "code           this checkout's trainer/, read-only at /app/trainer on worker-0, worker-1, worker-2, "
        "verifier, keeper (--dev)\n"
    ) in text
    assert "unless current (--dev: its code aside)\n" in text
    assert (
        f"  write {RUN}/compose.dev.yaml\n  {DOWN_BEGUN}\n  scripts/setup --dev --image-id-file {RUN}/image\n" in text
    )
    sandbox.assert_untouched()


def test_the_development_mode_mounts_this_checkouts_code_on_every_service_of_the_harness(recorded, tmp_path):
    status, recorder = recorded(["--dev", "--slow", "worker-1=0.5"])
    assert status == 0
    assert recorder.commands[1][0] == (
        str(tmp_path / "scripts" / "setup"),
        "--dev",
        "--image-id-file",
        ".tfcluster/runs/tfcluster/image",
    )
    assert recorder.commands[2][1]["env"]["COMPOSE_FILE"] == (
        "compose.yaml:.tfcluster/runs/tfcluster/compose.dev.yaml:.tfcluster/runs/tfcluster/compose.slow.yaml"
    )
    written = yaml.safe_load((tmp_path / ".tfcluster/runs/tfcluster/compose.dev.yaml").read_text())
    mount = {"type": "bind", "source": str(tmp_path / "trainer"), "target": "/app/trainer", "read_only": True}
    assert written == {"services": {name: {"volumes": [mount]} for name in ("worker-0", "worker-1", "verifier")}}


def test_in_a_container_a_bind_source_the_engine_does_not_see_is_refused_before_anything_starts(
    recorded, monkeypatch, tmp_path
):
    asked = []

    def unseen(sources, image, _environment):
        asked.append((sources, image))
        return ["--dev"]

    monkeypatch.setattr(hostpaths, "in_container", lambda _environment: True)
    monkeypatch.setattr(hostpaths, "unseen", unseen)
    status, recorder = recorded(["--dev"])
    assert status == 2
    assert asked == [({"--dev": str(tmp_path / "trainer")}, "tfcluster:latest")]
    # The set-up ran (the check needs its image), and the last run's `down` with it; nothing of the cluster did.
    assert [command for command, _ in recorder.commands] == [
        DOWN,
        (str(tmp_path / "scripts" / "setup"), "--dev", "--image-id-file", ".tfcluster/runs/tfcluster/image"),
    ]


def test_outside_a_container_or_with_nothing_mounted_nothing_is_checked(recorded, monkeypatch):
    monkeypatch.setattr(hostpaths, "unseen", lambda *_: pytest.fail("checked"))
    assert recorded(["--dev"])[0] == 0
    monkeypatch.setattr(hostpaths, "in_container", lambda _environment: True)
    assert recorded([])[0] == 0


def test_the_bind_sources_of_a_plan_are_what_its_workers_mount(tmp_path):
    project = Project(
        arguments=(), directory="/p", command=("python", "train.py"), data="/d", variables={},
        requirements=(), requirements_file=None, image=None,
    )  # fmt: skip
    assert run_plan.Plan(2, False, None, None, project, dev=True).bind_sources() == {
        "--project": "/p",
        "--data": "/d",
        "--dev": str(paths.ROOT / "trainer"),
    }
    assert run_plan.Plan(2, False, None, "/s/train.py").bind_sources() == {"TRAINER_SCRIPT": "/s/train.py"}
    assert run_plan.Plan(2, False, None, None).bind_sources() == {}


def test_without_the_development_mode_nothing_is_mounted_over_the_code(recorded):
    status, recorder = recorded([])
    assert status == 0
    assert "--dev" not in recorder.commands[0][0]
    assert ".tfcluster/runs/tfcluster/compose.dev.yaml" not in recorder.commands[2][1]["env"]["COMPOSE_FILE"]


def test_a_slowed_worker_beyond_the_machines_cores_is_refused_before_anything_starts(sandbox):
    # Not a dry run: Docker would refuse it only at `up`, after the set-up.
    cores = os.cpu_count()
    result = sandbox.run("scripts/run", "--slow", f"worker-0={cores + 0.5}")
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stderr == f"run: --slow worker-0={cores + 0.5}: more CPUs than this machine has ({cores})\n"
    sandbox.assert_untouched()
    assert sandbox.run("scripts/run", "--slow", f"worker-0={cores}", "--dry-run").returncode == 0


def test_the_dry_run_of_a_network_profile_on_four_workers_shapes_every_one(sandbox):
    result = sandbox.run("scripts/run", "--dry-run", "--network", "wan", "--workers", "4")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert (
        "compose files  compose.yaml:.tfcluster/runs/tfcluster/compose.workers.yaml:compose.network.yaml "
        "(COMPOSE_FILE)\n" in text
    ), text
    assert "network        profile wan, applied and measured by shaper-0, shaper-1, shaper-2, shaper-3\n" in text
    assert "scripts/workers.py 4 --network" in text
    sandbox.assert_untouched()


def test_the_dry_run_shows_each_fault_and_the_shaper_that_injects_it(sandbox):
    result = sandbox.run(
        "scripts/run", "--dry-run", "--network", "lan", "--fault", "cut worker-1 out at epoch 2 for 20s"
    )
    assert result.returncode == 0, result.stderr
    assert "fault          cut worker-1 off one way (what leaves it) at epoch 2 for 20s, by shaper-1\n" in result.stdout
    assert "TF_NETWORK_FAULTS='cut worker-1 out at epoch 2 for 20s'" in result.stdout
    sandbox.assert_untouched()


def test_the_dry_run_of_a_shaped_cluster_with_recovery_restarts_the_shapers_too(sandbox):
    result = sandbox.run("scripts/run", "--dry-run", "--network", "wan", "--recover")
    assert result.returncode == 0, result.stderr
    assert "compose.yaml:compose.recovery.yaml:compose.network.yaml (COMPOSE_FILE)" in result.stdout
    assert (
        "recovery       the keeper restarts the whole cluster (its shapers after the workers) after a failure, "
        "3 times at most\n"
    ) in result.stdout
    sandbox.assert_untouched()


def test_the_dry_run_shows_each_link_and_the_profile_of_every_direction(sandbox):
    result = sandbox.run(
        "scripts/run", "--dry-run", "--workers", "3", "--network", "lan", "--link", "worker-2 <-> *: wan"
    )
    assert result.returncode == 0, result.stderr
    assert (
        "link           worker-2 <-> *: wan\n"
        "               from \\ to  worker-0  worker-1  worker-2\n"
        "               worker-0   -         lan       wan\n"
        "               worker-1   lan       -         wan\n"
        "               worker-2   wan       wan       -\n"
    ) in result.stdout
    assert "TF_NETWORK_LINKS='worker-2 <-> *: wan'" in result.stdout
    sandbox.assert_untouched()

"""What the launcher compares besides the TRAIN_* settings, read at its edge (trainer/launcher/__main__.py):
the checkpoint directory but not the faults, the variables that change the computation, the versions,
the image and the command; then real launchers on loopback stopping on each before training."""

import json
import platform
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.unit.conftest import SLEEPER, finish
from trainer.contract import cluster as cluster_config
from trainer.contract.exitcodes import ExitCode
from trainer.contract.settings import LaunchSettings, TrainingSettings
from trainer.launcher import digests
from trainer.launcher.__main__ import _fingerprint
from trainer.launcher.rendezvous import differences

BASE = {"TF_WORKER_HOSTS": "worker-0,worker-1"}
_COMMAND_SUFFIX = "(another command, or another version of a file it names)"


def fingerprint_of(environ, command=("python", "-m", "trainer.training"), index=0):
    environ = {**BASE, "TF_TASK_INDEX": str(index), **environ}
    return _fingerprint(
        cluster_config.from_env(environ),
        TrainingSettings.from_env(environ),
        LaunchSettings.from_env(environ),
        environ,
        list(command),
    )


def compare(ours, theirs, ours_command=("python", "-m", "trainer.training"), theirs_command=None):
    mine = fingerprint_of(ours, ours_command)
    peer = fingerprint_of(theirs, theirs_command or ours_command, index=1)
    return differences(mine, peer, me="worker-0:12345", peer="worker-1:12345", expected_index=1)


def test_the_checkpoint_directory_is_compared_and_blank_means_none():
    assert fingerprint_of({"TF_CHECKPOINT_DIR": "/checkpoints"}).checkpoint_dir == "/checkpoints"
    assert fingerprint_of({"TF_CHECKPOINT_DIR": "  "}).checkpoint_dir == ""
    assert compare({"TF_CHECKPOINT_DIR": "/checkpoints"}, {"TF_CHECKPOINT_DIR": ""}) == [
        "TF_CHECKPOINT_DIR differs: worker-0:12345 has /checkpoints, worker-1:12345 has (empty: no checkpoints)"
    ]


def test_the_faults_injected_into_one_worker_are_not_compared():
    faults = {
        "TFCLUSTER_FAULT_EXIT_AT_STEP": "6",
        "TFCLUSTER_FAULT_COMMIT_DELAY": "2",
        "TFCLUSTER_FAULT_HANG_AT_STEP": "3",
    }
    assert compare({"TF_CHECKPOINT_DIR": "/checkpoints"}, {"TF_CHECKPOINT_DIR": "/checkpoints", **faults}) == []


def test_variables_that_change_the_computation_are_compared_where_set():
    found = compare({"TF_USE_LEGACY_KERAS": "1", "CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"})
    # Workers sharing a host are given different GPUs: the devices are each worker's own.
    assert found == ["TF_USE_LEGACY_KERAS differs: worker-0:12345 has 1, worker-1:12345 has (unset)"]
    assert fingerprint_of({}).variables == {}


def test_a_variable_the_user_lists_is_compared_once_as_a_user_setting():
    listed = {"TFCLUSTER_USER_ENV": "TF_USE_LEGACY_KERAS", "TF_USE_LEGACY_KERAS": "1"}
    fingerprint = fingerprint_of(listed)
    assert fingerprint.variables == {}
    assert list(fingerprint.user_settings) == ["TF_USE_LEGACY_KERAS"]
    found = compare(listed, {"TFCLUSTER_USER_ENV": "TF_USE_LEGACY_KERAS"})
    assert [line.split(":")[0] for line in found] == ["user setting TF_USE_LEGACY_KERAS differs"]


def test_the_versions_come_from_the_metadata_without_importing_tensorflow(tmp_path):
    """A stand-in tensorflow-cpu 9.9.9 whose package stops whoever imports it."""
    info = tmp_path / "tensorflow_cpu-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorflow-cpu\nVersion: 9.9.9\n")
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text("raise SystemExit('tensorflow was imported')\n")
    script = "import json; from trainer.launcher import runtime; print(json.dumps(runtime.versions()))"
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r}); {script}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["tensorflow-cpu"] == "9.9.9"
    assert found["Python"] == platform.python_version()
    assert set(found) == {"Python", "tensorflow", "tensorflow-cpu", "keras", "tf-keras"}


def test_the_image_is_the_launchers_own_package_and_the_os_release():
    assert fingerprint_of({}).image == digests.image_digest(str(ROOT / "trainer"))
    assert fingerprint_of({}).image.summary.startswith("trainer code ")


def test_the_command_is_compared_unless_every_worker_is_told_not_to():
    found = compare({}, {}, ours_command=("python", "-m", "trainer.training"), theirs_command=("python", "x.py"))
    assert [line.split(":")[0] for line in found] == ["training command differs"]
    assert "(3 words)" in found[0]
    off = {"TFCLUSTER_COMPARE_COMMAND": "0"}
    assert compare(off, off, theirs_command=("python", "x.py")) == []
    assert fingerprint_of(off).command == digests.UNCOMPARED_COMMAND
    one_sided = compare({}, off)
    assert one_sided[0].endswith("has (not compared: TFCLUSTER_COMPARE_COMMAND=0) " + _COMMAND_SUFFIX)


def test_a_bad_compare_command_value_is_one_clear_line():
    with pytest.raises(ValueError, match=r"^`TFCLUSTER_COMPARE_COMMAND` \('yes'\) must be one of 0, 1$"):
        LaunchSettings.from_env({"TFCLUSTER_COMPARE_COMMAND": "yes"})


# -- real launchers on loopback ------------------------------------------------------------------


def test_workers_with_different_checkpoint_directories_stop_before_training(cluster):
    workers = [cluster(0, TF_CHECKPOINT_DIR="/checkpoints"), cluster(1, TF_CHECKPOINT_DIR="")]
    addresses = [f"127.0.0.1:{port}" for port in cluster.ports]
    shown = ["/checkpoints", "(empty: no checkpoints)"]
    for index, worker in enumerate(workers):
        code, output, elapsed = finish(worker)
        assert code == ExitCode.CONFIG_ERROR, output
        peer = 1 - index
        line = f"TF_CHECKPOINT_DIR differs: {addresses[index]} has {shown[index]}, {addresses[peer]} has {shown[peer]}"
        assert f"topology mismatch: {line}\n" in output
        assert "training\n" not in output
        assert elapsed < 10


def test_workers_with_different_faults_agree_and_train(cluster):
    workers = [cluster(0), cluster(1, TFCLUSTER_FAULT_EXIT_AT_STEP="6", TFCLUSTER_FAULT_COMMIT_DELAY="2")]
    for worker in workers:
        read = []  # Kept, so that a launcher that never started its program shows what it said instead.
        for line in worker.stdout:
            read.append(line)
            if line.startswith("training"):
                break
        else:
            code, rest, _ = finish(worker)
            raise AssertionError(f"never started its program (exit {code}): {''.join(read)}{rest}")


def test_workers_asked_to_compare_different_commands_stop_before_training(cluster):
    other = [sys.executable, "-c", "print('another program', flush=True)"]
    workers = [cluster(0, SLEEPER, TFCLUSTER_COMPARE_COMMAND="1"), cluster(1, other, TFCLUSTER_COMPARE_COMMAND="1")]
    for worker in workers:
        code, output, _ = finish(worker)
        assert code == ExitCode.CONFIG_ERROR, output
        assert "topology mismatch: training command differs: " in output
        # The launcher's last line, before the same as data (trainer.contract.console).
        assert output.rstrip().splitlines()[-2].endswith(_COMMAND_SUFFIX)
        assert "training\n" not in output and "another program" not in output

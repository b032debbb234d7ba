"""The start gate (trainer/contract/gate.py): which programs wait at it, and what they see there."""

import os
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.unit.conftest import finish
from trainer import observer
from trainer.contract import gate
from trainer.contract.exitcodes import ExitCode
from trainer.launcher.program import OOM_SCORE_ADJ, Program, gate_of

OWN, YOURS = gate.VARIABLE, gate.TENSORFLOW_VARIABLE


@pytest.mark.parametrize(
    ("command", "held"),
    [
        (["python", "-m", "trainer.training"], OWN),
        (["/opt/venv/bin/python3", "-m", "trainer.benchmark.allreduce"], OWN),
        (["python", "-m", "trainer.benchmark.allreduce", "16"], OWN),
        # A Python program of yours: held by the image's observer where its TensorFlow reaches the cluster.
        (["python", "/user/train.py"], YOURS),
        (["python", "-m", "trainer.launcher"], YOURS),
        (["python3", "-u", "-X", "dev", "-W", "ignore", "train.py", "-S"], YOURS),  # -S there is the program's.
        (["python", "-Wignore", "-c", "import tensorflow"], YOURS),
        (["python", "-uc", "import tensorflow"], YOURS),
        # Without `site` the observer is not loaded; a shell, or another program, is not Python.
        (["python", "-S", "train.py"], None),
        (["python", "-uS", "train.py"], None),
        (["python", "-W", "ignore", "-IS", "train.py"], None),
        (["sh", "-m", "trainer.training"], None),
        (["sh", "-c", "python train.py"], None),
        ([], None),
    ],
)
def test_which_programs_wait_at_which_gate(venv, command, held):
    assert gate_of(command, str(venv)) == held


def test_a_program_of_yours_waits_for_the_rendezvous_where_no_observer_would_hold_it(venv, monkeypatch, tmp_path):
    assert gate_of(["python3", "train.py"], str(venv)) == YOURS
    # Another Python than the launcher's (its `site` loads another site-packages)...
    other = tmp_path / "elsewhere"
    python(other / "python3")
    assert gate_of(["python3", "train.py"], str(other)) is None
    assert gate_of([str(other / "python3"), "train.py"], str(venv)) is None
    # ...an image's observer from before the gate, or none at all (a host).
    monkeypatch.setitem(sys.modules, "_tfcluster_observer", object())
    assert gate_of(["python3", "train.py"], str(venv)) is None
    monkeypatch.delitem(sys.modules, "_tfcluster_observer")
    assert gate_of(["python3", "train.py"], str(venv)) is None


def python(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


@pytest.fixture
def venv(monkeypatch, tmp_path):
    """The launcher's Python, in a folder of its names, with the image's observer loaded."""
    folder = tmp_path / "venv" / "bin"
    for name in ("python", "python3"):
        python(folder / name)
    monkeypatch.setattr(sys, "executable", str(folder / "python"))
    monkeypatch.setitem(sys.modules, "_tfcluster_observer", observer)
    return folder


def test_the_gate_opens_on_go_and_stays_shut_when_closed():
    opened, shut = os.pipe(), os.pipe()
    os.write(opened[1], gate.GO)
    os.close(opened[1])
    os.close(shut[1])
    assert gate.wait_for_go({gate.VARIABLE: str(opened[0])}) is True
    assert gate.wait_for_go({gate.VARIABLE: str(shut[0])}) is False
    assert gate.wait_for_go({}) is True  # Not started by a launcher: nothing to wait for.


def test_a_gated_program_that_ends_while_the_workers_meet_ends_the_wait(cluster):
    # Worker 1 never comes; worker 0's program (gated, started at once) fails on its arguments.
    # Its launcher stops waiting for the peer and reports the program's own exit, not a join timeout.
    launcher = cluster(0, [sys.executable, "-m", "trainer.benchmark.allreduce", "0"], TF_JOIN_TIMEOUT="30")
    started = time.monotonic()
    code, output, _ = finish(launcher)
    assert code == ExitCode.CONFIG_ERROR, output
    assert "allreduce: config error: a size must be a whole number of MiB, at least 1, got '0'" in output
    assert time.monotonic() - started < 10


# A stand-in for this project's programs: it waits at the gate and says what it found there.
AT_THE_GATE = [
    sys.executable,
    "-c",
    "from trainer.contract import gate; print('went' if gate.wait_for_go() else 'shut', flush=True)",
]


def gated_program() -> Program:
    return Program(command=AT_THE_GATE, environment={**os.environ, "PYTHONPATH": str(ROOT)}, recorder=None)


def test_a_program_held_at_the_gate_goes_when_the_workers_have_met(capsys):
    program = gated_program()
    with program.held_at_gate():
        assert not program.has_ended()  # Started, and waiting.
    assert program.wait() == 0
    assert capsys.readouterr().out == "went\n"


def test_a_program_held_at_the_gate_never_goes_when_the_meeting_fails(capsys):
    program = gated_program()
    with pytest.raises(RuntimeError), program.held_at_gate():
        raise RuntimeError("the meeting failed")
    assert program.has_ended()
    assert "went" not in capsys.readouterr().out


def test_the_program_goes_before_its_launcher_when_memory_runs_out():
    program = gated_program()
    with program.held_at_gate():
        adjusted = Path(f"/proc/{program._process.pid}/oom_score_adj").read_text()
        own = Path("/proc/self/oom_score_adj").read_text()
    assert program.wait() == 0
    assert int(adjusted) == OOM_SCORE_ADJ > int(own)


# A program of yours as the image starts it (its observer installed by `site`, here by hand),
# on the stand-in TensorFlow (tests/unit/runtime/conftest.py); its launcher has the observer too.
YOUR_PROGRAM = [
    sys.executable,
    "-c",
    "import trainer.observer; trainer.observer.install(); from tensorflow.python.eager import context; "
    "print('imported', flush=True); context.Context().enable_collective_ops(None); print('trained', flush=True)",
]
OBSERVED_LAUNCHER = "import trainer.observer; sys.modules['_tfcluster_observer'] = trainer.observer"


def test_a_program_of_yours_reaches_the_cluster_only_once_the_workers_agree(cluster, stand_in_tensorflow):
    path = {"PYTHONPATH": f"{stand_in_tensorflow}{os.pathsep}{ROOT}"}
    launchers = [cluster(index, YOUR_PROGRAM, patches=OBSERVED_LAUNCHER, **path) for index in (0, 1)]
    for launcher in launchers:
        code, output, _ = finish(launcher)
        assert code == 0, output
        lines = output.splitlines()
        agreed = next(n for n, line in enumerate(lines) if "workers agree on the cluster" in line)
        assert lines.index("reached enable_collective_ops") > agreed
        assert lines.index("trained") > agreed


def test_a_program_of_yours_never_reaches_the_cluster_when_a_peer_never_comes(cluster, stand_in_tensorflow):
    path = {"PYTHONPATH": f"{stand_in_tensorflow}{os.pathsep}{ROOT}"}
    launcher = cluster(0, YOUR_PROGRAM, patches=OBSERVED_LAUNCHER, TF_JOIN_TIMEOUT="2", **path)
    code, output, _ = finish(launcher)
    assert code == ExitCode.PEER_NEVER_JOINED, output
    assert "imported" in output.splitlines()  # Started while its launcher waited...
    assert "reached" not in output  # ...and held there.
    assert "trained" not in output


def test_a_program_of_yours_that_ends_well_before_the_workers_agree_still_has_them_meet(cluster):
    # It never reached the cluster: its exit 0 says nothing of the peer that never came.
    done = [sys.executable, "-c", "print('done', flush=True)"]
    launcher = cluster(0, done, patches=OBSERVED_LAUNCHER, TF_JOIN_TIMEOUT="2")
    code, output, _ = finish(launcher)
    assert "done" in output.splitlines()  # Started at once, and ended...
    assert code == ExitCode.PEER_NEVER_JOINED, output  # ...but the worker did not pass.

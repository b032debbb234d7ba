"""The start gate (trainer/contract/gate.py): which programs wait at it, and what they see there."""

import os
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.unit.conftest import finish
from trainer.contract import gate
from trainer.contract.exitcodes import ExitCode
from trainer.launcher.program import OOM_SCORE_ADJ, Program, honours_gate


@pytest.mark.parametrize(
    ("command", "gated"),
    [
        (["python", "-m", "trainer.training"], True),
        (["/opt/venv/bin/python3", "-m", "trainer.benchmark.allreduce"], True),
        (["python", "/user/train.py"], False),  # Bring your own: started only after the rendezvous.
        (["python", "-m", "trainer.launcher"], False),
        (["python", "-m", "trainer.benchmark.allreduce", "16"], True),
        (["sh", "-m", "trainer.training"], False),
    ],
)
def test_only_this_projects_own_programs_wait_at_the_gate(command, gated):
    assert honours_gate(command) is gated


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

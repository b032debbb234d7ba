"""The observer's start gate (trainer/observer/gate.py): a program of your own, started before the
workers agree, is held at its first call that reaches the cluster, and never makes it if the gate
is closed. TensorFlow is not installed on the host: a stand-in package of the same module names
has the methods held, each of which says it was reached (tests/unit/runtime/conftest.py)."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from trainer.contract import gate as contract
from trainer.observer import GATE_VARIABLE, gate

# The program: the observer installed as the image's .pth does, then TensorFlow's modules, then
# the call given; `before` runs first (an import before the observer is there: a zygote's child).
PROGRAM = """
import os, sys
{before}
import trainer.observer
trainer.observer.install()
print("installed", os.environ.get({variable!r}), flush=True)
from tensorflow.python.eager import context
from tensorflow.python.training import server_lib
context.Context().executing_eagerly()
print("imported", flush=True)
{call}
print("trained", flush=True)
"""
CALLS = {
    "enable_collective_ops": "context.Context().enable_collective_ops(None)",
    "set_server_def": "context.Context().set_server_def(None)",
    "update_server_def": "context.Context().update_server_def(None)",
    "Server": "server_lib.Server(None)",
}


def run(stand_in_tensorflow, call: str, *, say: bytes | None, before: str = "") -> subprocess.CompletedProcess:
    """The program with the gate's pipe; the launcher's side says `say` (None: closes the gate)."""
    read, write = os.pipe()
    source = PROGRAM.format(before=before, variable=gate.VARIABLE, call=call)
    environment = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": f"{stand_in_tensorflow}{os.pathsep}{ROOT}",
        gate.VARIABLE: str(read),
    }
    with subprocess.Popen(
        [sys.executable, "-c", source], env=environment, stdout=subprocess.PIPE, text=True, pass_fds=(read,)
    ) as program:
        os.close(read)
        assert program.stdout.readline() == "installed None\n"  # Out of the environment: no child sees it.
        assert program.stdout.readline() == "imported\n"  # Its imports are not held...
        if say is not None:
            os.write(write, say)
        os.close(write)
        output = program.stdout.read()
    return subprocess.CompletedProcess(program.args, program.returncode, output)


def test_the_two_names_of_the_gate_are_the_same():
    assert gate.VARIABLE == GATE_VARIABLE == contract.TENSORFLOW_VARIABLE
    assert gate.GO == contract.GO


@pytest.mark.parametrize("held", list(CALLS))
def test_a_call_that_reaches_the_cluster_runs_once_the_gate_says_go(stand_in_tensorflow, held):
    ran = run(stand_in_tensorflow, CALLS[held], say=contract.GO)
    assert ran.returncode == 0
    assert ran.stdout == f"reached {held}\ntrained\n"


@pytest.mark.parametrize("held", list(CALLS))
def test_a_closed_gate_ends_the_program_before_the_call_reaches_the_cluster(stand_in_tensorflow, held):
    ran = run(stand_in_tensorflow, CALLS[held], say=None)
    assert ran.returncode == gate.CLOSED == 143
    assert ran.stdout == ""  # ...its first call to the cluster is.


def test_the_gate_is_read_once_for_every_call(stand_in_tensorflow):
    calls = "; ".join(CALLS.values())
    ran = run(stand_in_tensorflow, calls, say=contract.GO)
    assert ran.returncode == 0
    assert ran.stdout.splitlines() == [*(f"reached {held}" for held in CALLS), "trained"]


def test_tensorflow_imported_before_the_observer_is_held_too(stand_in_tensorflow):
    # A warm worker's zygote imported TensorFlow long before the run's child installs its observer.
    ran = run(
        stand_in_tensorflow,
        CALLS["enable_collective_ops"],
        say=None,
        before="from tensorflow.python.eager import context",
    )
    assert ran.returncode == gate.CLOSED
    assert ran.stdout == ""


def test_a_program_without_a_gate_is_not_held(stand_in_tensorflow):
    source = PROGRAM.format(before="", variable=gate.VARIABLE, call=CALLS["enable_collective_ops"])
    environment = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{stand_in_tensorflow}{os.pathsep}{ROOT}"}
    ran = subprocess.run([sys.executable, "-c", source], env=environment, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["installed None", "imported", "reached enable_collective_ops", "trained"]


def test_the_gate_is_kept_from_the_programs_children():
    read, write = os.pipe()
    try:
        os.set_inheritable(read, True)
        environ = {gate.VARIABLE: str(read)}
        taken = gate.take(environ)
        assert taken is not None
        assert environ == {}
        assert not os.get_inheritable(read)
    finally:
        os.close(write)
        os.close(read)


@pytest.mark.parametrize("named", ["", "soon", "999999"])
def test_a_gate_that_is_not_this_processs_pipe_holds_nothing(named):
    assert gate.take({gate.VARIABLE: named}) is None


def test_a_gate_whose_descriptor_the_program_reused_is_never_read():
    read, write = os.pipe()
    taken = gate.take({gate.VARIABLE: str(read)})
    os.close(read)
    other_read, other_write = os.pipe()  # The program's own pipe, under the gate's old number.
    os.write(other_write, b"the program's own data\n")
    try:
        assert other_read == read
        taken.pass_through()  # Not held: it cannot be, and never reads the program's data.
        assert os.read(other_read, 100) == b"the program's own data\n"
    finally:
        for descriptor in (write, other_read, other_write):
            os.close(descriptor)

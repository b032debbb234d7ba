"""Progress as the stall watchdog judges it (CPU time and output), and stack dumps asked of the right processes."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from trainer.contract import stacks
from trainer.launcher.activity import BUSY_CPU, Activity, catches, group_cpu_seconds, group_members, signal_catchers

# A Python program that installs the image's stack hook (as the image's .pth file does), says so, and waits.
WAITER = (
    "import sys, time\n"
    "from trainer.contract import stacks\n"
    "assert stacks.install()\n"
    "def wait_for_a_peer():\n"
    # Ready only once inside: asked as soon as it says so, it is in this function whatever the timing.
    "    print('ready', flush=True)\n"
    "    time.sleep(60)\n"
    "wait_for_a_peer()\n"
)


@pytest.fixture
def group():
    """Starts a command in a session (process group) of its own, as the launcher starts a program; kills it after."""
    started = []

    def start(command, **options):
        process = subprocess.Popen(command, start_new_session=True, **options)
        started.append(process)
        return process

    yield start
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_a_busy_program_is_never_idle_and_a_waiting_one_is_idle_since_its_last_line(group):
    busy = group([sys.executable, "-c", "while True: pass"])
    waiting = group(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert waiting.stdout.readline() == "ready\n"  # Started: the CPU time of its start-up is behind it.
    now = time.monotonic()
    watched = {name: Activity(process.pid, started=now) for name, process in (("busy", busy), ("waiting", waiting))}
    for activity in watched.values():
        activity.sample(now)
    time.sleep(1.0)  # A second of CPU time: /proc counts it in ticks of 10 ms.
    later = time.monotonic()
    for activity in watched.values():
        activity.sample(later)
    assert watched["busy"].idle_for(later) == 0
    assert watched["waiting"].idle_for(later) == pytest.approx(later - now)
    watched["waiting"].printed()
    watched["waiting"].sample(later + 1)
    assert watched["waiting"].idle_for(later + 3) == pytest.approx(2)
    assert group_cpu_seconds(busy.pid) > 0.2 > BUSY_CPU
    assert group_cpu_seconds(waiting.pid) < 0.5


def test_the_cpu_time_of_a_group_counts_its_children_too(group):
    shell = group(["sh", "-c", f"{sys.executable} -c 'while True: pass' & wait"])
    deadline = time.monotonic() + 10
    while len(group_members(shell.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # The shell starts its child: there is no event to wait on from outside.
    before = group_cpu_seconds(shell.pid)
    time.sleep(1.0)
    assert group_cpu_seconds(shell.pid) - before > 0.2  # Of a second: the machine may be busy with more.
    assert group_cpu_seconds(2**22 + 12345) is None  # No such group.


def test_the_stack_is_asked_only_of_the_processes_that_catch_the_signal(group):
    # A shell around the program would end on SIGUSR1: it must not be sent one.
    shell = group(
        ["sh", "-c", f'{sys.executable} -c "$WAITER"; echo shell-survived'],
        env={**os.environ, "WAITER": WAITER, stacks.VARIABLE: "1", "PYTHONPATH": os.getcwd()},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert shell.stdout.readline() == "ready\n"
    members = group_members(shell.pid)
    asked = signal_catchers(shell.pid, stacks.SIGNAL)
    assert len(asked) == 1 and asked[0] in members and asked[0] != shell.pid
    assert catches(asked[0], stacks.SIGNAL) and not catches(shell.pid, stacks.SIGNAL)
    header = shell.stdout.readline()
    assert header.startswith("Current thread 0x") or header.startswith("Thread 0x"), header
    frames = [shell.stdout.readline() for _ in range(2)]
    assert " in wait_for_a_peer" in frames[0]
    assert shell.poll() is None  # Nothing was stopped.


def test_without_the_launchers_variable_the_hook_installs_nothing():
    assert stacks.install({}) is False
    assert stacks.install({stacks.VARIABLE: "0"}) is False

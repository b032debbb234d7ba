"""The set-up's commands: one whose wait a signal cuts short is still ended by `stop`."""

import os
import signal

import pytest
from tfcluster.setup.children import Children


class Interrupted(Exception):
    pass


def test_a_command_whose_wait_a_signal_cuts_short_is_ended_by_stop(tmp_path):
    children = Children()
    pid_file = tmp_path / "pid"

    def interrupt(_number, _frame):
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(Interrupted):
            children.run(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 30"])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    pid = int(pid_file.read_text())
    os.kill(pid, 0)  # Still running: the signal reached the set-up, not the command's own group.
    children.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)

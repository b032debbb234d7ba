"""Whether the training program is making progress, judged from what every program gives: CPU time and output.

A program that trains burns CPU (a step is computation) or prints. One stuck in a collective that
a peer never joins does neither: its threads sleep on a condition variable, and TensorFlow's
runtime around them wakes now and then for a few milliseconds (measured: docs/failures.md,
"Stalls"). So the program counts as idle from the last moment it printed a line or used more
than `BUSY_CPU` seconds of CPU in one second, whatever program it is: this project's, or a
user's own `model.fit`.

The CPU time is read from /proc for every process in the program's process group (the launcher
starts it in a session of its own), plus what the group's leader has reaped of its children.
"""

import os
import signal
from pathlib import Path

PROC = Path("/proc")
# CPU-seconds per second of wall time above which the program is computing, not waiting.
BUSY_CPU = 0.05
_TICKS = os.sysconf("SC_CLK_TCK")


class Activity:
    """Samples a process group; `idle_for(now)` is how long it has been neither computing nor printing."""

    def __init__(self, group: int, *, started: float, proc: Path = PROC):
        self._group = group
        self._proc = proc
        self._last_active = started
        self._last_sample: tuple[float, float] | None = None  # (when, CPU-seconds then)
        self.lines = 0  # Printed so far.
        self._lines_seen = 0

    def printed(self) -> None:
        """Called for every line the program prints (from the forwarding thread: a counter is enough)."""
        self.lines += 1

    def sample(self, now: float) -> None:
        cpu = group_cpu_seconds(self._group, self._proc)
        lines = self.lines
        if lines != self._lines_seen:
            self._lines_seen = lines
            self._last_active = now
        if self._last_sample is not None and cpu is not None:
            when, before = self._last_sample
            if now > when and (cpu - before) / (now - when) > BUSY_CPU:
                self._last_active = now
        if cpu is not None:
            self._last_sample = (now, cpu)

    def idle_for(self, now: float) -> float:
        return max(0.0, now - self._last_active)


def _stat_fields(pid: str, proc: Path) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold spaces and parentheses)."""
    try:
        text = (proc / pid / "stat").read_text()
    except OSError:  # Gone since it was listed.
        return None
    return text[text.rfind(")") + 2 :].split()


def _group_stats(group: int, proc: Path) -> dict[int, list[str]]:
    """Each process of the group, with its /proc/PID/stat fields after the name: one read of each."""
    members = {}
    for entry in proc.iterdir() if proc.is_dir() else ():
        if entry.name.isdigit():
            fields = _stat_fields(entry.name, proc)
            # After the name: state (0), parent (1), process group (2), ... up to cstime (14).
            if fields and len(fields) > 14 and fields[2] == str(group):
                members[int(entry.name)] = fields
    return members


def group_members(group: int, proc: Path = PROC) -> list[int]:
    return list(_group_stats(group, proc))


def group_cpu_seconds(group: int, proc: Path = PROC) -> float | None:
    """User and system CPU time of the group's live processes, and of the children its leader reaped."""
    members = _group_stats(group, proc)
    # utime (11) and stime (12); the leader's cutime (13) and cstime (14) hold its reaped children.
    ticks = sum(int(fields[11]) + int(fields[12]) for fields in members.values())
    if group in members:
        ticks += int(members[group][13]) + int(members[group][14])
    return ticks / _TICKS if members else None


def catches(pid: int, signal_number: int, proc: Path = PROC) -> bool:
    """Whether the process has a handler for the signal (/proc's SigCgt mask), so sending it cannot kill it."""
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal_number - 1) & 1)
    return False


def signal_catchers(group: int, signal_number: int = signal.SIGUSR1, proc: Path = PROC) -> list[int]:
    """Sends `signal_number` to every process of the group that handles it; returns their ids.

    Only to those: the signal's default action ends a process (a shell wrapping the program, say).
    """
    sent = []
    for pid in group_members(group, proc):
        if catches(pid, signal_number, proc):
            try:
                os.kill(pid, signal_number)
                sent.append(pid)
            except ProcessLookupError:
                pass
    return sent

"""Cancelled means stopped (tfcluster/cluster/cancel.py): a signal to the run ends its wait for a
child, the child's whole group is sent SIGTERM and then, if it lingers, SIGKILL; and a run
cancelled while its cluster runs stops it, tears it down, writes a failing report and exits 128 +
the signal."""

import io
import os
import signal
import subprocess
import sys
import threading
import time
from xml.etree import ElementTree

import pytest
from tfcluster.cluster import cancel, orphans, plain, runs
from tfcluster.commands import ci_run, run

from tests.unit.host.conftest import DOWN


def signal_soon(number: int, after: float = 0.3) -> None:
    threading.Timer(after, os.kill, (os.getpid(), number)).start()


def test_a_signal_ends_the_wait_and_the_child_is_passed_sigterm(tmp_path):
    said = tmp_path / "said"
    # A child that says what it got, and a grandchild in its group that must go with it.
    script = f"trap 'echo TERM > {said}; exit 0' TERM; sleep 60 & wait"
    signal_soon(signal.SIGTERM)
    started = time.monotonic()
    with pytest.raises(cancel.Cancelled) as cancelled, cancel.Watch():
        cancel.run(["sh", "-c", script], grace=10)
    assert cancelled.value.status == 143 and cancelled.value.code == 143
    assert said.read_text() == "TERM\n"
    assert time.monotonic() - started < 5
    # The child's group is gone, its sleep included.
    listed = subprocess.run(["pgrep", "-f", "sleep 60"], capture_output=True, text=True)
    assert listed.stdout == ""


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    signal_soon(signal.SIGINT)
    started = time.monotonic()
    with pytest.raises(cancel.Cancelled) as cancelled, cancel.Watch():
        cancel.run(["sh", "-c", "trap '' TERM; sleep 60"], grace=0.5)
    assert cancelled.value.status == 130
    assert 0.5 <= time.monotonic() - started < 5


def test_outside_a_signal_the_child_runs_to_its_end_and_the_handlers_are_restored():
    before = signal.getsignal(signal.SIGTERM)
    with cancel.Watch():
        assert cancel.run(["sh", "-c", "exit 3"]).returncode == 3
    assert signal.getsignal(signal.SIGTERM) is before


class Cluster:
    """Stands in for Docker: `up` runs until the run is signalled, which it is while it runs."""

    def __init__(self):
        self.commands: list[tuple[str, ...]] = []

    def __call__(self, command, **options):
        self.commands.append(tuple(command))
        if command[0].endswith("scripts/setup"):
            return subprocess.CompletedProcess(command, 0)
        if "up" in command:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # The signal's handler raises in here.
            raise AssertionError("the signal did not end the wait")
        return subprocess.CompletedProcess(command, 0, stdout="", stderr="")


@pytest.mark.parametrize("entry", ["run", "ci-run"])
def test_a_run_cancelled_while_its_cluster_trains_stops_it_tears_it_down_and_fails_its_report(
    entry, recorded, monkeypatch, tmp_path
):
    stand_in = Cluster()
    recorded([], codes={})  # The sandbox: the root, compose.yaml, no other checkout's containers.
    monkeypatch.setattr(subprocess, "run", stand_in)
    monkeypatch.setattr(cancel, "run", stand_in)
    monkeypatch.setattr(runs, "foreign_checkouts", lambda _name, _root: [])
    monkeypatch.setattr(orphans, "remove", lambda: [])  # tests/unit/host/cluster/test_orphans.py
    report = tmp_path / "verdict.xml"
    with pytest.raises(SystemExit) as ended:
        if entry == "run":
            run.main(["--junit", str(report)], environ={"PATH": os.environ["PATH"]})
        else:
            raise SystemExit(ci_run.main([], environ={"PATH": os.environ["PATH"], "TFCLUSTER_CI_JUNIT": str(report)}))
    assert ended.value.code == 143
    verbs = [command[2] for command in stand_in.commands if command[0] == "docker"]
    # Compose's own `stop` (of what its `up` did not stop), the verdict read back, then `down`.
    assert verbs == ["down", "up", "stop", "logs", "down"]
    assert stand_in.commands[-1] == DOWN
    suite = ElementTree.fromstring(report.read_text())
    assert suite.get("failures") == "1"
    assert "143" in report.read_text()


class LateCluster(Cluster):
    """A run that trains to its verdict, then is signalled while its verdict is read back."""

    def __init__(self, signal_number: int):
        super().__init__()
        self.signal_number = signal_number

    def __call__(self, command, **options):
        if "logs" in command:
            self.commands.append(tuple(command))
            os.kill(os.getpid(), self.signal_number)  # Noted: the read-back goes on.
            return subprocess.CompletedProcess(command, 0, stdout="", stderr="")
        if "up" in command:
            self.commands.append(tuple(command))
            return subprocess.CompletedProcess(command, 0)
        return super().__call__(command, **options)


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_a_finished_runs_verdict_is_read_back_still_ends_it_as_cancelled(
    signal_number, recorded, monkeypatch, tmp_path
):
    # Before, noted and dropped: the cancelled job's step ended with the verdict's status.
    stand_in = LateCluster(signal_number)
    recorded([], codes={})
    monkeypatch.setattr(subprocess, "run", stand_in)
    monkeypatch.setattr(cancel, "run", stand_in)
    monkeypatch.setattr(runs, "foreign_checkouts", lambda _name, _root: [])
    report = tmp_path / "verdict.xml"
    with pytest.raises(SystemExit) as ended:
        run.main(["--junit", str(report)], environ={"PATH": os.environ["PATH"]})
    assert ended.value.code == 128 + signal_number
    verbs = [command[2] for command in stand_in.commands if command[0] == "docker"]
    # The run as usual (down, up, its stop, the read-back), then its cluster taken down.
    assert verbs == ["down", "up", "stop", "logs", "down"]
    suite = ElementTree.fromstring(report.read_text())
    assert suite.get("failures") == "1" and str(128 + signal_number) in report.read_text()


def test_the_watch_raises_once_then_notes_and_gives_the_handlers_back():
    before = signal.getsignal(signal.SIGHUP)
    with cancel.Watch() as signals:
        with pytest.raises(cancel.Cancelled) as raised:
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(5)
        assert raised.value.status == 129
        os.kill(os.getpid(), signal.SIGTERM)  # The clean-up's: noted, not raised.
        assert signals.late == signal.SIGTERM
    assert signal.getsignal(signal.SIGHUP) is before


# -- the reader of the run's output gone (`scripts/run | head`) -------------------------------------


@pytest.fixture
def readerless():
    """A stream whose reader has gone, as `head` leaves a run's standard output; its file number
    is checked afterwards for what it became."""
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "wb") as stream:
        yield stream


def into(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def test_a_copier_whose_reader_is_gone_reads_its_child_to_the_end_into_dev_null(readerless):
    # Outside a run (SIGPIPE ignored, Python's default): only the output is dropped. Before, the
    # copier died at its first line and a child writing more than a pipe holds blocked for good.
    source, sink = os.pipe()
    copier = threading.Thread(target=plain._copy, args=(source, readerless), daemon=True)
    copier.start()
    with os.fdopen(sink, "wb") as child:
        child.write(b"a line of a chatty program\n" * 40_000)  # About 1 MiB: many pipes' worth.
    copier.join(timeout=10)
    assert not copier.is_alive()
    assert into(readerless.fileno()) == "/dev/null"


def test_a_copier_whose_reader_is_gone_cancels_the_run_waiting_in_the_main_thread_as_sigpipe(readerless):
    source, sink = os.pipe()
    copier = threading.Thread(target=plain._copy, args=(source, readerless), daemon=True)
    started = time.monotonic()
    try:
        with pytest.raises(cancel.Cancelled) as cancelled, cancel.Watch():
            copier.start()
            os.write(sink, b"the line head waited for, and the next\n")
            time.sleep(5)  # The run waiting on its child: the write's own SIGPIPE went to the copier's thread.
    finally:
        os.close(sink)  # The copier reads to the end and stops.
    copier.join(timeout=10)
    assert cancelled.value.status == 141 and cancelled.value.name.startswith("SIGPIPE (the reader")
    assert time.monotonic() - started < 3


def test_a_broken_pipe_of_the_runs_own_making_is_not_its_reader_gone_and_cancels_nothing():
    # `docker build -` ending before it read its context (tfcluster/cluster/build.py): the write's
    # BrokenPipeError is the build's to report, where it was written. Without the readers' flag the
    # write's SIGPIPE cancelled the run as if its output's reader had gone.
    read, write = os.pipe()
    os.close(read)
    try:
        with cancel.Watch() as signals:
            with pytest.raises(BrokenPipeError):
                os.write(write, b"the build's context")
            time.sleep(0.2)  # Where a handler of the write's SIGPIPE would have raised.
    finally:
        os.close(write)
    assert signals.late is None


def test_the_runs_own_lines_to_a_stream_whose_reader_is_gone_cancel_it_and_raise_nothing_after(readerless):
    original, text = sys.stderr, io.TextIOWrapper(readerless)
    with cancel.outliving_readers():
        sys.stderr = cancel.Outliving(text)  # As it wraps the real one.
        with pytest.raises(cancel.Cancelled) as cancelled, cancel.Watch():
            print("run: a line nobody reads", file=sys.stderr, flush=True)
            time.sleep(5)
        print("run: received SIGPIPE ...: stopping the cluster", file=sys.stderr, flush=True)  # The clean-up's.
    assert sys.stderr is original
    assert cancelled.value.status == 141
    assert into(readerless.fileno()) == "/dev/null"

"""The zygote (trainer/zygote/) and the launcher's side of it (trainer/launcher/forked.py), on this machine.

A stand-in zygote (standin.py: the real server and child, without TensorFlow's import) forks real
programs; each test checks what a program sees and how its end is reported, as `python` would.
"""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from trainer.contract import zygote as protocol
from trainer.launcher import forked
from trainer.launcher.program import Program
from trainer.zygote import child, server, threads

STANDIN = Path(__file__).with_name("standin.py")
# What the zygote and every run share, so that their keys agree unless a test changes one.
# A UTF-8 locale: where it is C, Python sets LC_CTYPE in its own environment, as a launcher's has.
BASE = {
    "PATH": os.environ["PATH"],
    "LANG": "C.UTF-8",
    "PYTHONPATH": str(ROOT),
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}


@pytest.fixture
def zygote(tmp_path):
    """Starts the stand-in zygote; yields its socket and a reader of its output; stops it after."""
    socket_path = str(tmp_path / "zygote" / "socket")
    started = []

    def start(*, wait=True, **variables):
        environment = {**BASE, protocol.SOCKET_VARIABLE: socket_path, **variables}
        process = subprocess.Popen(
            [sys.executable, str(STANDIN)],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=tmp_path,
        )
        started.append(process)
        for line in process.stdout if wait else ():  # The socket is there once it says so.
            if "ready" in line:
                break
        return process

    yield socket_path, start
    for process in started:
        process.kill()
        rest = process.stdout.read()
        process.wait(timeout=10)
        print(f"the zygote's output after it was ready:\n{rest}")


def fork(socket_path, command, *, cwd, timeout=20.0, **variables):
    """The launcher's request, as trainer/launcher/program.py makes it: output into a pipe of ours."""
    read, write = os.pipe()
    said = []
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        process, cold = forked.fork(
            command,
            {**BASE, **variables},
            {1: write, 2: write},
            timeout=timeout,
            say=said.append,
            socket_path=socket_path,
        )
    finally:
        os.chdir(previous)
        os.close(write)
    output = os.fdopen(read, encoding="utf-8", errors="replace")
    return process, cold, output, said


def test_a_forked_program_runs_as_python_would_start_it_and_its_end_is_reported(zygote, tmp_path):
    socket_path, start = zygote
    start()
    (tmp_path / "helper.py").write_text("NAME = 'helper from the script folder'\n")
    (tmp_path / "main.py").write_text(
        textwrap.dedent(
            """
            import os, sys
            import helper
            print(helper.NAME, sys.argv[1:], os.getcwd(), os.environ["RUN_SETTING"], flush=True)
            print("pgid is pid", os.getpgid(0) == os.getpid(), flush=True)
            sys.exit(3)
            """
        )
    )
    process, cold, output, _ = fork(
        socket_path, [sys.executable, str(tmp_path / "main.py"), "--flag"], cwd=tmp_path, RUN_SETTING="this run's"
    )
    assert cold is None
    text = output.read()
    assert process.wait() == 3, text
    assert f"helper from the script folder ['--flag'] {tmp_path} this run's" in text
    assert "pgid is pid True" in text  # A process group of its own, which the launcher stops.
    assert process.usage["max_rss_kib"] > 0 and process.usage["cpu_seconds"] >= 0


def test_an_uncaught_exception_is_printed_and_exits_1_and_a_message_exit_says_it(zygote, tmp_path):
    socket_path, start = zygote
    start()
    process, _, output, _ = fork(
        socket_path, [sys.executable, "-c", "raise ValueError('the program broke')"], cwd=tmp_path
    )
    assert process.wait() == 1
    assert "ValueError: the program broke" in output.read()
    process, _, output, _ = fork(socket_path, [sys.executable, "-c", "import sys; sys.exit('told why')"], cwd=tmp_path)
    assert process.wait() == 1
    assert "told why" in output.read()


def test_a_file_left_open_is_flushed_and_atexit_handlers_run(zygote, tmp_path):
    socket_path, start = zygote
    start()
    program = (
        "import atexit\n"
        "log = open('left-open.txt', 'w')\n"
        "log.write('written, never closed')\n"
        "atexit.register(print, 'atexit ran', flush=True)\n"
    )
    process, _, output, _ = fork(socket_path, [sys.executable, "-c", program], cwd=tmp_path)
    assert process.wait() == 0
    assert "atexit ran" in output.read()
    assert (tmp_path / "left-open.txt").read_text() == "written, never closed"


def test_what_a_programs_objects_write_as_python_destroys_them_is_written_as_by_python(zygote, tmp_path):
    # As a tf.io.TFRecordWriter never closed: its records reach the file only when Python's shutdown
    # destroys it. A child that ended with os._exit once the atexit handlers had run left such a
    # file empty (measured with TensorFlow's writer: 0 bytes warm, 1016 cold).
    socket_path, start = zygote
    start()
    program = textwrap.dedent(
        """
        class Writer:
            def __init__(self, path):
                self.path, self.pending = path, []

            def write(self, record):
                self.pending.append(record)

            def __del__(self, open=open):  # As a C++ destructor, needing nothing of Python's then.
                with open(self.path, "w") as file:
                    file.write("".join(self.pending))

        writer = Writer(WHERE)
        writer.write("a record kept until its writer is destroyed")
        """
    )
    for where, how in (("by-python.txt", "python"), ("forked.txt", "forked")):
        code = f"WHERE = {where!r}\n" + program
        if how == "python":  # The control: what `python` itself leaves.
            subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=BASE, check=True, timeout=30)
            continue
        process, cold, _, _ = fork(socket_path, [sys.executable, "-c", code], cwd=tmp_path)
        assert cold is None
        assert process.wait() == 0
    expected = "a record kept until its writer is destroyed"
    assert (tmp_path / "by-python.txt").read_text() == expected
    assert (tmp_path / "forked.txt").read_text() == expected


def test_an_edited_module_is_imported_afresh_by_the_next_run(zygote, tmp_path):
    socket_path, start = zygote
    start()
    package = tmp_path / "project"
    package.mkdir()
    for version in ("first", "second"):
        (package / "model.py").write_text(f"VERSION = {version!r}\n")
        process, _, output, _ = fork(
            socket_path, [sys.executable, "-m", "train"], cwd=package, PYTHONPATH=f"{ROOT}{os.pathsep}{package}"
        )
        (package / "train.py").write_text("import model, trainer.contract\nprint('model', model.VERSION)\n")
        process.wait()
        text = output.read()
        if version == "second":
            assert "model second" in text, text


def test_python_reads_its_hash_seed_at_start_so_another_seed_restarts_the_zygote(zygote, tmp_path):
    socket_path, start = zygote
    zygote_process = start(PYTHONHASHSEED="1")
    probe = [sys.executable, "-c", "print('hash', hash('tfcluster'))"]
    expected = subprocess.run(probe, env={**BASE, "PYTHONHASHSEED": "2"}, capture_output=True, text=True).stdout
    process, cold, output, said = fork(socket_path, probe, cwd=tmp_path, PYTHONHASHSEED="2")
    assert cold is None
    assert said == ["the warm zygote restarts for this run: PYTHONHASHSEED is '1' in the zygote, '2' for the run"]
    assert process.wait() == 0
    assert output.read() == expected  # What a fresh `python` with that seed computes.
    restarted = next(line for line in zygote_process.stdout if "started with key" in line)
    assert "('PYTHONHASHSEED', '2')" in restarted


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (["sh", "-c", "echo hi"], "'sh' is not Python"),
        ([sys.executable, "-O", "-c", "pass"], "`python -O` sets what the zygote's interpreter was started without"),
        ([sys.executable], "a program read from standard input"),
    ],
)
def test_a_command_a_fork_cannot_run_as_python_would_starts_cold(zygote, tmp_path, command, reason):
    socket_path, start = zygote
    start()
    process, cold, _, _ = fork(socket_path, command, cwd=tmp_path)
    assert process is None
    assert cold == reason


def test_an_unsafe_zygote_starts_every_run_cold_saying_why(zygote, tmp_path):
    socket_path, start = zygote
    start(STANDIN_UNSAFE="thread 'x' of unknown purpose is running")
    process, cold, _, _ = fork(socket_path, [sys.executable, "-c", "pass"], cwd=tmp_path)
    assert (process, cold) == (None, "thread 'x' of unknown purpose is running")


def test_no_zygote_within_the_timeout_is_a_cold_start_not_a_hang(tmp_path):
    started = time.monotonic()
    process, cold, _, _ = fork(str(tmp_path / "none"), [sys.executable, "-c", "pass"], cwd=tmp_path, timeout=0.5)
    assert process is None
    assert cold == f"no zygote answered at {tmp_path / 'none'} within 0.5 s"
    assert time.monotonic() - started < 5


# A launcher that asks for a sleeping program, says its pid, and waits to be killed.
LAUNCHER = """
import os, sys, time
from trainer.launcher import forked
read, write = os.pipe()
process, cold = forked.fork(
    [sys.executable, "-c", "import time; time.sleep(120)"], dict(os.environ), {1: write, 2: write},
    timeout=20, say=print, socket_path=sys.argv[1],
)
print(process.pid if process else None, cold, flush=True)
time.sleep(120)
"""


def test_a_launcher_killed_takes_its_program_with_it_and_the_zygote_serves_on(zygote, tmp_path):
    socket_path, start = zygote
    start()
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, socket_path], env=BASE, cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    pid, cold = launcher.stdout.readline().strip().split(" ", 1)
    assert cold == "None", cold
    assert Path(f"/proc/{pid}").exists()
    launcher.kill()  # SIGKILL: its connection closes with it, as with any end of a launcher.
    launcher.wait(timeout=10)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # No event of another process's end reaches this one.
    # Killed, and reaped by the zygote. Once, in a suite run, still there after 10 s: killed too
    # early, before the child's setsid had made its group (server._kill_group).
    assert not Path(f"/proc/{pid}").exists(), Path(f"/proc/{pid}/stat").read_text()
    again, _, output, _ = fork(socket_path, [sys.executable, "-c", "print('next run')"], cwd=tmp_path)
    assert again.wait() == 0 and output.read() == "next run\n"


def test_a_connection_that_sends_nothing_holds_up_no_run(zygote, tmp_path):
    socket_path, start = zygote
    start()
    stray = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stray.connect(socket_path)  # Never sends a request: the zygote gives up on it after a while.
    try:
        started = time.monotonic()
        process, cold, output, _ = fork(socket_path, [sys.executable, "-c", "print('served')"], cwd=tmp_path)
        assert cold is None and process.wait() == 0 and output.read() == "served\n"
        assert time.monotonic() - started < server.REQUEST_WAIT + 5
    finally:
        stray.close()


def test_a_killed_program_is_reported_killed_and_the_zygote_serves_on(zygote, tmp_path):
    socket_path, start = zygote
    start()
    process, _, output, _ = fork(
        socket_path, [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"], cwd=tmp_path
    )
    assert output.readline() == "up\n"
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    again, _, _, _ = fork(socket_path, [sys.executable, "-c", "pass"], cwd=tmp_path)
    assert again.wait() == 0


def test_a_warm_program_waits_at_the_start_gate_and_its_usage_is_the_zygotes_report(zygote, tmp_path):
    socket_path, start = zygote
    start()
    lines = []
    program = Program(
        command=[
            sys.executable,
            "-c",
            "from trainer.contract import gate; print('went' if gate.wait_for_go() else 'shut')",
        ],
        environment=dict(BASE),
        recorder=None,
        forking=forked.Forking(20.0, socket_path),
        say=lines.append,
    )
    previous = os.getcwd()
    os.chdir(tmp_path)
    try:
        with program.held_at_gate():
            pass
    finally:
        os.chdir(previous)
    assert program.wait() == 0
    assert lines[0].startswith("forked its program from the warm zygote (pid ")
    assert program.usage().peak_memory > 0


def test_a_programs_child_that_outlives_it_is_reaped_not_left_a_zombie(zygote, tmp_path):
    socket_path, start = zygote
    start()
    program = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'], stdin=subprocess.PIPE)\n"
        "print(child.pid, flush=True)\n"
    )
    process, _, output, _ = fork(socket_path, [sys.executable, "-c", program], cwd=tmp_path)
    orphan = output.readline().strip()
    assert process.wait() == 0  # Its child lives on (its stdin closes with the program: then it ends).
    deadline = time.monotonic() + 10
    while Path(f"/proc/{orphan}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # No event of another process's end reaches this one.
    assert not Path(f"/proc/{orphan}").exists()  # Not even a zombie: the zygote reaped it.


def test_a_request_whose_launcher_went_away_before_it_was_read_forks_nothing(zygote, tmp_path):
    # A zygote still importing (the stand-in sleeps first) has the request in its backlog; the
    # launcher gives up waiting, closes, and starts its program cold. No second program of its run.
    socket_path, start = zygote
    standin = start(wait=False, STANDIN_IMPORT_SECONDS="2")
    marker = tmp_path / "ran"
    process, cold, _, _ = fork(
        socket_path, [sys.executable, "-c", f"open({str(marker)!r}, 'w')"], cwd=tmp_path, timeout=0.5
    )
    assert process is None and cold.startswith("the zygote did not answer"), cold
    for line in standin.stdout:  # Served: what was in its backlog has been read.
        if "ready" in line:
            break
    after, _, output, _ = fork(socket_path, [sys.executable, "-c", "print('next run')"], cwd=tmp_path)
    assert after.wait() == 0 and output.read() == "next run\n"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("argv", "parsed"),
    [
        (["python", "-m", "pkg.train", "--fast"], child.Command("module", "pkg.train", ["--fast"])),
        (["python", "-c", "print(1)", "a"], child.Command("code", "print(1)", ["a"])),
        (["python", "train.py", "-m", "x"], child.Command("script", "train.py", ["-m", "x"])),
        (["python", "-m"], "`python -m` without its argument"),
        (["/usr/bin/perl", "x.pl"], "'/usr/bin/perl' is not Python"),
    ],
)
def test_commands_are_read_as_python_reads_them(argv, parsed, monkeypatch):
    monkeypatch.setattr(child, "_resolved", lambda _executable: os.path.realpath(sys.executable))
    assert child.parse(argv) == parsed


def test_key_is_what_python_and_tensorflow_read_at_start_up():
    environ = {
        "TF_USE_LEGACY_KERAS": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": "/project",  # Read afresh by every child.
        "TF_CONFIG": "{}",  # Read when the strategy is made, in the child.
        "TRAIN_EPOCHS": "3",
        "OMP_NUM_THREADS": "1",
    }
    assert protocol.key_of(environ) == {"OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "TF_USE_LEGACY_KERAS": "1"}
    assert protocol.key_differences({"TF_USE_LEGACY_KERAS": "1"}, {}) == [
        "TF_USE_LEGACY_KERAS is '1' in the zygote, unset for the run"
    ]


def test_a_python_thread_or_a_thread_that_survives_a_fork_is_named(tmp_path):
    tasks = tmp_path / "task"
    (tasks / str(os.getpid())).mkdir(parents=True)
    (tasks / str(os.getpid()) / "comm").write_text("python\n")
    assert threads.unsafe_reason({}, tasks) is None
    (tasks / "12345").mkdir()
    (tasks / "12345" / "comm").write_text("grpc_global_tim\n")
    assert threads.unsafe_reason({"NumPy (OpenBLAS's pool)": 1}, tasks) == (
        "1 thread(s) besides the main one survive a fork (started: 1 by NumPy (OpenBLAS's pool))"
    )

"""Supervises one worker's training program so that no failure hangs or passes silently.

Phases, each bounded:
0. Network (with compose.network.yaml only, within the join deadline): wait until this worker's
   shaper has applied its profile and measured every link (trainer/contract/shaping.py).
1. Rendezvous (up to the join deadline): every peer must answer with the same configuration.
   Progress is printed at least every 10 s; a mismatch or an absent peer ends the worker. This
   project's own programs are started at once and import TensorFlow meanwhile, held at a gate
   (trainer/contract/gate.py) until every worker agrees; any other program starts after the rendezvous.
2. Training (up to the run deadline): the program runs while a heartbeat watches every peer. A
   peer that stops answering, or reports a failed exit, is lost; the program then gets a short
   grace to end on its own (TensorFlow usually fails at once), and is stopped after it.
3. Exit: the final state stays served until every live peer has seen it (at most a few seconds),
   so a slower peer learns how this worker ended instead of finding it gone.
Exit codes are trainer.contract.exitcodes'; the reason is always printed as one `launcher |` line.
"""

import contextlib
import dataclasses
import math
import os
import resource
import signal
import subprocess
import sys
import threading
import time

from trainer.contract import gate as trainer_gate
from trainer.contract import shaping
from trainer.contract.cluster import Cluster, host_of
from trainer.contract.console import show
from trainer.contract.exitcodes import ExitCode
from trainer.contract.resultsdir import Recorder
from trainer.launcher import rendezvous
from trainer.launcher.peers import PeerWatch

PROGRESS_INTERVAL = 10.0
# How often the supervisor looks at what the peer watches (trainer/launcher/peers.py) have learned.
CHECK_INTERVAL = 0.05
HEARTBEAT_INTERVAL = 1.0
HEARTBEAT_TIMEOUT = 2.0
# Missed heartbeats in a row before a peer counts as lost: one slow answer is not a failure.
HEARTBEAT_MISSES = 3
# After a peer is lost, how long the program may take to end on its own before it is stopped.
LOST_PEER_GRACE = 10.0
FAILED_PEER_GRACE = 5.0
# TensorFlow's preemption notifier swallows SIGTERM; after this long the program gets SIGKILL.
STOP_GRACE = 2.0
# How long an ending worker keeps serving its final state for peers that have not yet seen it.
LINGER = 3.0


# How often each peer is asked while the workers meet: every poll delays the start of training
# by up to this long, but every worker asks every peer, so in larger clusters each peer is asked
# less often (up to 20 requests a second per worker, or every 0.2 s from 4 peers on).
def meeting_interval(peers: int) -> float:
    return min(0.2, 0.05 * max(1, peers))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Deadlines:
    join: float
    run: float


class Supervisor:
    def __init__(
        self,
        *,
        cluster: Cluster,
        fingerprint: rendezvous.Fingerprint,
        rendezvous_base_port: int,
        deadlines: Deadlines,
        recorder: Recorder | None,
        shaped_in: str | None = None,
        run_id: str | None = None,
    ):
        self._cluster = cluster
        self._fingerprint = fingerprint
        self._deadlines = deadlines
        self._recorder = recorder
        self._shaped_in = shaped_in  # The results directory the shaper reports to, if shaped.
        self._run_id = run_id  # This launcher's, as its status publishes it for the shaper.
        self._me = cluster.address
        self._base_port = rendezvous_base_port
        self._server = rendezvous.Server(
            fingerprint, rendezvous.rendezvous_port(cluster, cluster.index, rendezvous_base_port)
        )
        self._watches: list[PeerWatch] = []
        self._stop_signal: int | None = None
        self._ended = threading.Event()
        self._program: subprocess.Popen | None = None
        self._forwarder: threading.Thread | None = None
        self._started = 0.0
        self._kill_reason: tuple[int, str] | None = None
        self._finished: set[int] = set()  # Peers that reported a successful exit.
        self._lost: dict[str, str] = {}

    def say(self, line: str) -> None:
        show(f"launcher | {self._me}: {line}\n", self._recorder)

    def handle_signal(self, signum, _frame) -> None:
        if self._stop_signal is not None:
            return
        self._stop_signal = signum
        # Straight to the file descriptor: the handler may have interrupted a buffered write.
        os.write(
            sys.stdout.fileno(), f"launcher | {self._me}: received {signal.Signals(signum).name}, stopping\n".encode()
        )
        self._ended.set()
        self._terminate()

    def run(self, command: list[str], environment: dict[str, str]) -> int:
        self._watches = [
            PeerWatch(
                position=position,
                address=address,
                port=rendezvous.rendezvous_port(self._cluster, position, self._base_port),
                me=self._cluster.index,
                timeout=HEARTBEAT_TIMEOUT,
                interval=meeting_interval(self._cluster.size - 1),
            )
            for position, address in enumerate(self._cluster.workers)
            if position != self._cluster.index
        ]
        exit_code = self._run(command, environment)
        self._server.set_state(f"exited {exit_code}")
        if self._recorder:
            self._recorder.finish(exit_code)
        for watch in self._watches:
            watch.stop()
        if self._stop_signal is None:
            answered = {w.position for w in self._watches if w.latest and w.latest.answered}
            self._server.wait_until_seen(answered - self._finished, LINGER)
        self._server.close()
        return exit_code

    def _run(self, command, environment) -> int:
        if self._shaped_in and (ended := self._ended_by(self._wait_for_shaping())) is not None:
            return ended
        gate = None
        if honours_gate(command):
            # Started now, it imports TensorFlow while the workers meet and waits at the gate.
            gate_read, gate = os.pipe()
            self._start(command, {**environment, trainer_gate.VARIABLE: str(gate_read)}, pass_fds=(gate_read,))
            os.close(gate_read)
        failure = self._rendezvous()
        if gate is not None:
            self._open_or_shut(gate, go=failure is None and self._stop_signal is None)
        if (ended := self._ended_by(failure)) is not None:
            return ended
        if gate is None:
            self._start(command, environment)
        return self._supervise()

    def _ended_by(self, failure: tuple[int, str] | None) -> int | None:
        """The exit code if a phase ended the run (a signal, or a failure it names), else None."""
        if self._stop_signal is not None:
            return self._stopped_code()
        if failure:
            code, message = failure
            self.say(message)
            return code
        return None

    def _open_or_shut(self, gate: int, *, go: bool) -> None:
        """Lets a gated program start training, or ends it without its touching the cluster."""
        if go and self._program.poll() is None:
            with contextlib.suppress(BrokenPipeError):  # It ended meanwhile: its exit tells why.
                os.write(gate, trainer_gate.GO)
        os.close(gate)  # Without `go`, the program reads the end of the pipe and gives up...
        if not go:
            self._end_program()  # ...or is made to.

    def _wait_for_shaping(self) -> tuple[int, str] | None:
        started = time.monotonic()
        deadline = started + self._deadlines.join
        self.say("waiting for this worker's network shaper")
        while (report := shaping.read_report(self._shaped_in, self._cluster.host, self._run_id)) is None:
            if time.monotonic() >= deadline:
                return ExitCode.CONFIG_ERROR, (
                    f"no network measurements from this worker's shaper within the {self._deadlines.join:.0f}s join "
                    f"deadline (is compose.network.yaml's shaper running? its log says why)"
                )
            if self._ended.wait(CHECK_INTERVAL):  # A signal; nothing to wait on but the shaper's file.
                return None
        self.say(shaping.summary(report))
        if not report.get("ok"):
            missed = "; ".join(check["check"] for check in report.get("checks", []) if not check["ok"])
            return ExitCode.CONFIG_ERROR, f"the network shaping misses its profile: {missed}"
        return None

    # -- rendezvous -----------------------------------------------------------------------------

    def _rendezvous(self) -> tuple[int, str] | None:
        """A two-phase barrier: check every peer's fingerprint, then wait until every peer has too.

        Without the second phase a worker could start TensorFlow while a peer still waits on a third
        worker that never comes, and hang in TensorFlow's join instead of failing here.
        """
        started = time.monotonic()
        deadline = started + self._deadlines.join
        validated: set[int] = set()
        next_progress = started + PROGRESS_INTERVAL
        if self._watches:
            self.say(f"waiting for {len(self._watches)} peer(s), up to {self._deadlines.join:.0f}s")
        while True:
            waiting = []
            for watch in self._watches:
                seen = watch.latest
                if seen is not None and seen.fingerprint is not None and watch.position not in validated:
                    found = rendezvous.differences(
                        self._fingerprint,
                        seen.fingerprint,
                        me=self._me,
                        peer=watch.address,
                        expected_index=watch.position,
                    )
                    if found:
                        return ExitCode.CONFIG_ERROR, "topology mismatch: " + "; ".join(found)
                    validated.add(watch.position)
                    if len(validated) == len(self._watches):
                        self._server.set_state("agreed")
                state = seen.state if seen else None
                if state and state.startswith("exited") and state != "exited 0":
                    return ExitCode.PEER_NEVER_JOINED, f"peer {watch.address} gave up before training ({state})"
                if state in (None, "waiting"):
                    if seen is None:
                        reason = "no answer yet"
                    elif seen.answered:
                        reason = "answering, still waiting for its own peers"
                    else:
                        reason = seen.unavailable
                    waiting.append(f"{watch.address} ({reason})")
            if not waiting:
                break
            now = time.monotonic()
            if now >= deadline:
                return ExitCode.PEER_NEVER_JOINED, (
                    f"peer(s) never joined within the {self._deadlines.join:.0f}s join deadline: {', '.join(waiting)}"
                )
            if now >= next_progress:
                self.say(f"waiting for {', '.join(waiting)} {now - started:.0f}s/{self._deadlines.join:.0f}s")
                next_progress += PROGRESS_INTERVAL
            if self._program is not None and self._program.poll() is not None:
                return None  # A gated program ended before it could start: its exit says why.
            if self._ended.wait(min(CHECK_INTERVAL, max(0.0, deadline - now))):
                return None
        self._server.set_state("agreed")
        if self._watches:
            elapsed = time.monotonic() - started
            self.say(f"all {self._cluster.size} workers agree on the cluster and settings after {elapsed:.1f}s")
        return None

    # -- training -------------------------------------------------------------------------------

    def _start(self, command, environment, *, pass_fds=()) -> None:
        self._program = subprocess.Popen(
            command,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
            pass_fds=pass_fds,
        )
        self._started = time.monotonic()
        self._forwarder = threading.Thread(target=self._forward, args=(self._program.stdout,), daemon=True)
        self._forwarder.start()
        if self._stop_signal is not None:  # A signal arrived while the program was starting.
            self._terminate()

    def _forward(self, output) -> None:
        for line in output:
            show(line, self._recorder)

    def _end_program(self) -> None:
        """After a failed rendezvous: the program must go, at once (it has only been importing)."""
        _kill_group(self._program.pid)
        self._program.wait()
        self._forwarder.join()

    def _supervise(self) -> int:
        self._server.set_state("running")
        for watch in self._watches:
            watch.interval = HEARTBEAT_INTERVAL
        threading.Thread(target=self._watch, daemon=True).start()
        exit_code = self._program.wait()
        self._forwarder.join()  # Every line it printed is out before the launcher's own.
        # What the containers' limits are sized by (compose.yaml). Linux gives the peak in KiB.
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        # Worded to be no failure reason (trainer/verifier/metrics.py): it follows every end alike.
        self.say(
            f"training program used {time.monotonic() - self._started:.1f}s, "
            f"{usage.ru_utime + usage.ru_stime:.1f} CPU-seconds, peak memory {usage.ru_maxrss / 1024:.0f} MiB"
        )
        self._ended.set()  # Ends the watch thread.
        if self._stop_signal is not None:
            return self._stopped_code()
        if self._kill_reason:
            code, message = self._kill_reason
            self.say(message)
            return code
        if exit_code in (ExitCode.CONFIG_ERROR, ExitCode.TRAINING_CHECK_FAILED):
            return exit_code  # The program's own verdict on itself, whatever its peers did since.
        if exit_code != 0:
            lost = self._lost or self._probe_peers()
            if lost:
                self.say(f"training program exited {_describe(exit_code)} after losing peer(s): {_listing(lost)}")
                return ExitCode.PEER_LOST
            return 128 - exit_code if exit_code < 0 else exit_code
        return ExitCode.OK

    def _watch(self) -> None:
        """Enforces the run deadline, and stops the program a grace period after a peer is lost."""
        run_deadline = time.monotonic() + self._deadlines.run
        stop_at = math.inf
        while not self._ended.wait(CHECK_INTERVAL):
            now = time.monotonic()
            if now >= run_deadline:
                self._kill(
                    ExitCode.DEADLINE_EXCEEDED, f"still running at the {self._deadlines.run:.0f}s run deadline: stopped"
                )
                return
            for watch in self._watches:
                if watch.address in self._lost or watch.position in self._finished:
                    continue
                seen = watch.latest
                if seen is None:
                    continue
                if seen.answered and seen.state == "exited 0":
                    self._finished.add(watch.position)
                    watch.stop()  # It is about to vanish, and that is no loss.
                elif seen.answered and seen.state.startswith("exited"):
                    # A failed peer is gone for good, so the grace is shorter; not zero, because this
                    # worker may be past its last collective and finishing well.
                    self._lose(watch.address, seen.state)
                    stop_at = min(stop_at, now + FAILED_PEER_GRACE)
                elif seen.misses >= HEARTBEAT_MISSES:
                    self._lose(watch.address, f"{seen.unavailable} ({seen.misses} heartbeats missed)")
                    stop_at = min(stop_at, now + LOST_PEER_GRACE)
            if now >= stop_at:
                self._kill(ExitCode.PEER_LOST, f"stopped: lost peer(s) {_listing(self._lost)}")
                return

    def _lose(self, peer: str, reason: str) -> None:
        self._lost[peer] = reason
        self.say(f"lost peer {peer}: {reason}")

    def _kill(self, code: int, message: str) -> None:
        self._kill_reason = (code, message)
        self._terminate()

    def _terminate(self) -> None:
        program = self._program
        if program is None:
            return
        try:
            os.killpg(program.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        timer = threading.Timer(STOP_GRACE, _kill_group, args=(program.pid,))
        timer.daemon = True
        timer.start()

    def _probe_peers(self) -> dict[str, str]:
        """After the program failed: asks every peer at once whether it is gone or failed."""
        lost = {}
        for watch in self._watches:
            # A peer seen ending well is not lost, even if it is gone before this question.
            if watch.position in self._finished or (watch.latest and watch.latest.state == "exited 0"):
                continue
            try:
                _, state = rendezvous.fetch(host_of(watch.address), watch.port, me=self._cluster.index, timeout=1.0)
            except rendezvous.PeerUnavailable as unavailable:
                lost[watch.address] = str(unavailable)
                continue
            if state.startswith("exited") and state != "exited 0":
                lost[watch.address] = state
        return lost

    def _stopped_code(self) -> int:
        self.say(f"stopped by {signal.Signals(self._stop_signal).name}")
        return ExitCode.TERMINATED


# This project's own programs wait at the start gate (trainer/contract/gate.py) after their imports.
GATED_MODULES = frozenset({"trainer.training", "trainer.benchmark.allreduce"})


def honours_gate(command: list[str]) -> bool:
    return (
        len(command) >= 3
        and os.path.basename(command[0]).startswith("python")
        and command[1] == "-m"
        and command[2] in GATED_MODULES
    )


def _kill_group(process_group: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # It ended within the grace period.
        os.killpg(process_group, signal.SIGKILL)


def _describe(exit_code: int) -> str:
    return f"on signal {-exit_code}" if exit_code < 0 else str(exit_code)


def _listing(lost: dict[str, str]) -> str:
    return ", ".join(f"{peer} ({reason})" for peer, reason in lost.items())

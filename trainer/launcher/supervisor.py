"""Supervises one worker's training program so that no failure hangs or passes silently.

Phases, each bounded, each in a module of its own:
0. Network (with compose.network.yaml only, within the join deadline): wait until this worker's
   shaper has applied its profile and measured every link (trainer/launcher/shaping.py).
1. Rendezvous (up to the join deadline): every peer must answer with the same configuration
   (trainer/launcher/barrier.py). This project's own programs are started at once and import
   TensorFlow meanwhile, held at a gate (trainer/contract/gate.py) until every worker agrees; any
   other program starts after the rendezvous (trainer/launcher/program.py).
2. Training (up to the run deadline): the program runs while a watchdog watches every peer and
   this worker's own health (trainer/launcher/health.py: its program's progress, its container's
   memory), and stops the program if a peer is lost, if it thrashes at its memory limit, or if no
   worker makes progress: a stall, when each program's stack is dumped first
   (trainer/launcher/watchdog.py); a program that fails on its own is asked about afterwards: did
   the kernel kill it for memory, did a peer go? (trainer/launcher/postmortem.py). Meanwhile the
   launcher counts the bytes of TensorFlow's own connections and prints them as one record once the
   program has ended (trainer/launcher/traffic.py).
3. Exit: the final state stays served until every live peer has seen it (at most 9 s), so a
   slower peer learns how this worker ended instead of finding it gone (trainer/launcher/lingering.py);
   with a shared results directory, a peer that still missed it reads the status recorded there.
A phase that ends the run raises a LaunchFailure (trainer/launcher/failures.py), a signal included:
its message is printed as one `launcher |` line and recorded as the status's reason, and its code
is the exit code (trainer.contract.exitcodes).
"""

import dataclasses
import functools
import math
import os
import signal
import sys
import time

from trainer.contract.cluster import Cluster
from trainer.contract.console import Log, failed_event, show
from trainer.contract.resultsdir import Recorder
from trainer.launcher import rendezvous, traffic
from trainer.launcher.barrier import Barrier, meeting_interval
from trainer.launcher.failures import LaunchFailure
from trainer.launcher.forked import Forking
from trainer.launcher.fullresults import FullResults
from trainer.launcher.health import Health
from trainer.launcher.lingering import linger_then_close
from trainer.launcher.peers import PeerWatch, recorded_exits, watch_peers
from trainer.launcher.postmortem import judge
from trainer.launcher.program import Program, honours_gate
from trainer.launcher.shaping import wait_for_shaping
from trainer.launcher.stopping import StopRequest
from trainer.launcher.watchdog import Watchdog


@dataclasses.dataclass(frozen=True, kw_only=True)
class Deadlines:
    """The launch settings' bounds: the join and run deadlines, and how long a stopped program may take to end."""

    join: float
    run: float
    stop_grace: float
    # How long every worker's program may go without progress before the cluster is stopped as stalled.
    stall: float = math.inf


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
        results_dir: str | None = None,
    ):
        self._cluster = cluster
        self._fingerprint = fingerprint
        self._deadlines = deadlines
        self._recorder = recorder
        self._shaped_in = shaped_in  # The results directory the shaper reports to, if shaped.
        self._run_id = run_id  # This launcher's, as its status publishes it for the shaper.
        self._me = cluster.address
        self.say = functools.partial(_say, f"launcher | {self._me}: ", recorder)
        self._base_port = rendezvous_base_port
        # Where the peers' statuses tell how they ended, for one gone before a heartbeat saw it. A peer
        # ends after it met this worker, so an older status is stale (slack: file times to the second).
        self._recorded_exit = recorded_exits(results_dir, own_host=cluster.host, since=time.time() - 2)
        port = rendezvous.rendezvous_port(cluster, cluster.index, rendezvous_base_port)
        self._server = rendezvous.Server(fingerprint, port)
        self._stop = StopRequest()
        # Made by run(); the signal handler stops the watchdog and the program once they exist.
        self._watches: list[PeerWatch] = []
        self._program: Program | None = None
        self._watchdog: Watchdog | None = None
        # This worker's idle time and memory, served with every heartbeat answer (trainer/launcher/health.py).
        self._health = Health()
        self._server.serve_health(self._health.to_record)
        self._usage = None  # What the program used, once it has ended: recorded in the status.
        self._full = FullResults(recorder, say=self.say, stop=lambda: self._program and self._program.stop())

    def handle_signal(self, signal_number, _frame) -> None:
        if not self._stop.request(signal_number):
            return
        name = signal.Signals(signal_number).name
        # Straight to the file descriptor: the handler may have interrupted a buffered write.
        os.write(sys.stdout.fileno(), f"launcher | {self._me}: received {name}, stopping\n".encode())
        if self._watchdog is not None:
            self._watchdog.stop()  # Peers that go away from now on are being stopped too: no news.
        if self._program is not None:
            self._program.stop()

    def run(self, command: list[str], environment: dict[str, str], forking: Forking | None = None) -> int:
        """The phases in order; the first failure, or a signal, ends the run with its exit code."""
        self._watches = watch_peers(self._cluster, self._base_port, interval=meeting_interval(self._cluster.size - 1))
        self._program = Program(
            command=command,
            environment=environment,
            recorder=self._recorder,
            stop_grace=self._deadlines.stop_grace,
            forking=forking,
            say=self.say,
        )
        self._watchdog = Watchdog(
            watches=self._watches,
            run_timeout=self._deadlines.run,
            stop_program=self._program.stop,
            say=self.say,
            recorded_exit=self._recorded_exit,
            health=self._health,
            stall_timeout=self._deadlines.stall,
            dump_stacks=self._program.dump_stacks,
        )
        try:
            self._wait_for_network()
            self._meet(gated=honours_gate(command))
            exit_code, reason = self._train(), None
        except LaunchFailure as failure:
            # The reason is the whole line, so that the verdict names which worker's launcher said it.
            exit_code, reason = failure.exit_code, self.say(failure.message)
        exit_code, reason = self._full.outcome(exit_code, reason, signalled=self._stop.requested)
        self._end(exit_code, reason)
        # The watches go on asking meanwhile: a peer seen ending is waited for no longer.
        linger_then_close(server=self._server, watches=self._watches, stop=self._stop)
        return exit_code

    def _wait_for_network(self) -> None:
        """Phase 0, with a network profile only: the shaper's measurements must match the profile."""
        if self._shaped_in:
            wait_for_shaping(
                results_dir=self._shaped_in,
                host=self._cluster.host,
                run_id=self._run_id,
                join_timeout=self._deadlines.join,
                stop=self._stop,
                say=self.say,
            )

    def _meet(self, *, gated: bool) -> None:
        """Phase 1: every worker agrees on the cluster and settings; then the program may train."""
        barrier = Barrier(
            fingerprint=self._fingerprint,
            watches=self._watches,
            server=self._server,
            me=self._me,
            join_timeout=self._deadlines.join,
            stop=self._stop,
            say=self.say,
        )
        if gated:
            # Started now, it imports TensorFlow while the workers meet and waits at the gate.
            with self._program.held_at_gate():
                barrier.meet(program_ended=self._program.has_ended)
                self._stop.check()  # A signal may have ended the meeting, or the program: the gate stays shut.
        else:
            barrier.meet(program_ended=self._program.has_ended)
            self._stop.check()  # After a signal the program is not even started.
            self._program.start()

    def _train(self) -> int:
        """Phase 2: the program trains under the watchdog; returns its exit code as the launcher reports it."""
        self._server.set_state("running")
        self._health.watch(self._program.activity)
        self._watchdog.start()
        with traffic.counted(traffic.tensorflow_ports(self._cluster), self._recorder):  # The verifier's proof.
            exit_code = self._program.wait()
        self._usage = self._program.usage()
        self.say(self._usage.line())
        self._watchdog.stop()
        self._watchdog.join()  # What it learned is final from here on.
        self._stop.check()  # A signal outweighs whatever else ended the program.
        self._health.check_killed(exit_code)
        if self._watchdog.failure is not None:
            raise self._watchdog.failure
        return judge(
            exit_code,
            lost=self._watchdog.lost,
            watches=self._watches,
            finished=self._watchdog.finished,
            me=self._cluster.index,
            recorded_exit=self._recorded_exit,
        )

    def _end(self, exit_code: int, reason: str | None) -> None:
        """Phase 3: publishes how this worker ended, to its peers and in the results directory for the verifier."""
        self._server.set_state(f"exited {exit_code}")
        if reason:  # As data too, for a saved log, which has no status (trainer.contract.console).
            show(failed_event(exit_code, reason) + "\n", self._recorder)
        if self._recorder:
            # A reason only when the launcher ended the run: otherwise the program's own log says why.
            details = {"reason": reason} if reason else {}
            usage = {"usage": self._usage.to_record()} if self._usage else {}  # What the verifier compares.
            self._recorder.finish(exit_code, **details, **usage)


def _say(prefix: str, recorder: Log | None, message: str) -> str:
    """Prints (and records) one launcher line; returns it, as the status's reason may be this line."""
    line = f"{prefix}{message}"
    show(f"{line}\n", recorder)
    return line

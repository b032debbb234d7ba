"""The launcher's fail-fast behaviour, with real launcher processes on loopback and stand-in
training programs (no TensorFlow, no Docker): mismatches, absent and lost peers, deadlines, and the
reason each leaves in the results directory. Then its pieces on their own: failures, barrier, watchdog."""

import hashlib
import json
import signal
import sys
import threading
import time

import pytest

from tests.conftest import free_port
from tests.unit.conftest import SLEEPER, finish, recorded_status
from trainer.contract.exitcodes import ExitCode
from trainer.launcher import lingering
from trainer.launcher import watchdog as watchdog_module
from trainer.launcher.barrier import Barrier
from trainer.launcher.failures import (
    DeadlineExceeded,
    LaunchFailure,
    PeerLost,
    PeerNeverJoined,
    ShapingMissed,
    Stopped,
    TopologyMismatch,
)
from trainer.launcher.lingering import linger
from trainer.launcher.peers import HEARTBEAT_TIMEOUT, Observation, PeerWatch
from trainer.launcher.postmortem import judge
from trainer.launcher.rendezvous import Fingerprint, Server
from trainer.launcher.stopping import StopRequest
from trainer.launcher.watchdog import HEARTBEAT_MISSES, Watchdog


def test_agreeing_workers_start_their_programs(cluster):
    done = [sys.executable, "-c", "print('trained')"]
    workers = [cluster(0, done), cluster(1, done)]
    for worker in workers:
        code, output, _ = finish(worker)
        assert code == 0, output
        assert "all 2 workers agree on the cluster and settings" in output
        assert "trained" in output


@pytest.mark.parametrize(
    ("variables", "ours", "theirs"),
    [
        ({"TRAIN_BATCH_SIZE": "32"}, "TRAIN_BATCH_SIZE", ("16", "32")),
        ({"TRAIN_SEED": "8"}, "TRAIN_SEED", ("7", "8")),
        ({"TRAIN_EPOCHS": "4"}, "TRAIN_EPOCHS", ("3", "4")),
        ({"TRAIN_STEPS_PER_EPOCH": "5"}, "TRAIN_STEPS_PER_EPOCH", ("4", "5")),
        ({"TRAIN_LEARNING_RATE": "0.01"}, "TRAIN_LEARNING_RATE", ("0.03", "0.01")),
    ],
)
def test_differing_training_settings_stop_both_workers_before_training(cluster, variables, ours, theirs):
    workers = [cluster(0), cluster(1, **variables)]
    addresses = [f"127.0.0.1:{port}" for port in cluster.ports]
    for index, worker in enumerate(workers):
        code, output, elapsed = finish(worker)
        assert code == ExitCode.CONFIG_ERROR, output
        peer = 1 - index  # Each worker states the difference from its own side.
        expected = f"{ours} differs: {addresses[index]} has {theirs[index]}, {addresses[peer]} has {theirs[peer]}"
        assert f"topology mismatch: {expected}" in output
        assert "training\n" not in output  # The stand-in program never started.
        assert elapsed < 10


def test_a_peer_with_another_cluster_list_is_named(cluster):
    third = free_port()
    while third in cluster.ports:  # A port of the cluster's not yet bound may be handed out again.
        third = free_port()
    other = f"127.0.0.1:{cluster.ports[0]},127.0.0.1:{cluster.ports[1]},127.0.0.1:{third}"
    workers = [cluster(0), cluster(1, TF_WORKER_HOSTS=other)]
    code, output, _ = finish(workers[0])
    assert code == ExitCode.CONFIG_ERROR
    assert f"worker count differs: 127.0.0.1:{cluster.ports[0]} has 2, 127.0.0.1:{cluster.ports[1]} has 3" in output


def test_a_peer_that_never_starts_ends_the_worker_at_the_join_deadline(cluster):
    worker = cluster(0, TF_JOIN_TIMEOUT="12")
    code, output, elapsed = finish(worker)
    assert code == ExitCode.PEER_NEVER_JOINED, output
    peer = f"127.0.0.1:{cluster.ports[1]}"
    assert f"waiting for {peer} (resolvable, not listening yet) 10s/12s" in output
    assert f"peer(s) never joined within the 12s join deadline: {peer} (resolvable, not listening yet)" in output
    assert 12 <= elapsed < 12 + 10


def test_the_status_of_a_worker_whose_peer_never_joined_carries_the_reason(cluster, tmp_path):
    worker = cluster(0, TF_JOIN_TIMEOUT="1", TF_RESULTS_DIR=str(tmp_path))
    code, output, _ = finish(worker)
    assert code == ExitCode.PEER_NEVER_JOINED, output
    peer = f"127.0.0.1:{cluster.ports[1]}"
    message = f"peer(s) never joined within the 1s join deadline: {peer} (resolvable, not listening yet)"
    status = recorded_status(tmp_path, "127.0.0.1")
    line = f"launcher | 127.0.0.1:{cluster.ports[0]}: {message}"
    assert (status["exit_code"], status["reason"]) == (ExitCode.PEER_NEVER_JOINED, line)
    assert f"{line}\n" in output


def test_a_lost_peer_stops_the_survivor_naming_it(cluster, tmp_path):
    workers = [cluster(0, TF_RESULTS_DIR=str(tmp_path)), cluster(1)]
    for worker in workers:
        for line in worker.stdout:
            if line.startswith("training"):
                break
    workers[1].kill()  # SIGKILL: no goodbye, as with `docker kill`.
    code, output, elapsed = finish(workers[0])
    assert code == ExitCode.PEER_LOST, output
    assert f"lost peer 127.0.0.1:{cluster.ports[1]}: resolvable, not listening yet" in output
    assert elapsed < 20
    status = recorded_status(tmp_path, "127.0.0.1")
    assert status["exit_code"] == ExitCode.PEER_LOST
    me, peer = (f"127.0.0.1:{port}" for port in cluster.ports)
    assert status["reason"].startswith(f"launcher | {me}: stopped: lost peer(s) {peer} (resolvable, not listening")
    assert f"{status['reason']}\n" in output  # The reason is the launcher's printed line.


def test_the_run_deadline_stops_a_program_that_runs_too_long(cluster, tmp_path):
    worker = cluster(0, TF_WORKER_HOSTS="127.0.0.1", TF_RUN_TIMEOUT="3", TF_RESULTS_DIR=str(tmp_path))
    code, output, elapsed = finish(worker)
    assert code == ExitCode.DEADLINE_EXCEEDED, output
    assert "still running at the 3s run deadline: stopped" in output
    assert elapsed < 3 + 5
    reason = recorded_status(tmp_path, "127.0.0.1")["reason"]
    assert reason == "launcher | 127.0.0.1:12345: still running at the 3s run deadline: stopped"


def test_sigterm_while_waiting_for_peers_ends_the_worker_at_once(cluster):
    worker = cluster(0)
    for line in worker.stdout:
        if "waiting for 1 peer(s)" in line:
            break
    worker.send_signal(signal.SIGTERM)
    code, output, elapsed = finish(worker)
    assert code == ExitCode.TERMINATED
    assert "received SIGTERM, stopping" in output
    assert elapsed < 5


def test_a_failed_training_check_is_reported_as_such_after_the_peer_has_gone(cluster, tmp_path):
    finishes_well = [sys.executable, "-c", "print('trained')"]
    fails_its_check_later = [sys.executable, "-c", "import time; time.sleep(5); raise SystemExit(3)"]
    workers = [cluster(0, finishes_well), cluster(1, fails_its_check_later, TF_RESULTS_DIR=str(tmp_path))]
    assert finish(workers[0])[0] == 0
    code, output, _ = finish(workers[1])
    assert code == ExitCode.TRAINING_CHECK_FAILED, output  # Not "peer lost": the peer ended well.
    # The program's own failure: the launcher has nothing to add, and its log says why.
    assert "reason" not in recorded_status(tmp_path, "127.0.0.1")


# sha256 of "0.1" and of "0.2": the values themselves never travel (they may be secrets).
SHA_01, SHA_02 = (
    "sha256:" + hashlib.sha256(b"0.1").hexdigest()[:16],
    "sha256:" + hashlib.sha256(b"0.2").hexdigest()[:16],
)


@pytest.mark.parametrize(
    ("theirs", "shown"),
    [({"LEARNING_RATE": "0.2"}, SHA_02), ({}, "(unset)")],
)
def test_a_user_setting_that_differs_or_is_unset_on_a_peer_stops_both_workers(cluster, theirs, shown):
    named = {"TFCLUSTER_USER_ENV": "LEARNING_RATE"}
    workers = [cluster(0, **named, LEARNING_RATE="0.1"), cluster(1, **named, **theirs)]
    me, peer = (f"127.0.0.1:{port}" for port in cluster.ports)
    code, output, _ = finish(workers[0])
    assert code == ExitCode.CONFIG_ERROR, output
    assert f"topology mismatch: user setting LEARNING_RATE differs: {me} has {SHA_01}, {peer} has {shown}\n" in output
    assert "has 0.1" not in output  # The value is neither printed nor, so, recorded.
    assert finish(workers[1])[0] == ExitCode.CONFIG_ERROR


def test_workers_given_different_project_files_stop_before_training(cluster, tmp_path):
    projects = [tmp_path / "a", tmp_path / "b"]
    for project, code in zip(projects, ("rate = 0.1\n", "rate = 0.2\n"), strict=True):
        project.mkdir()
        (project / "train.py").write_text(code)
    workers = [cluster(index, TFCLUSTER_PROJECT_DIR=str(project)) for index, project in enumerate(projects)]
    for worker in workers:
        code, output, _ = finish(worker)
        assert code == ExitCode.CONFIG_ERROR, output
        assert "topology mismatch: project files differ: " in output
        assert "(1 files, 11 bytes)" in output
        said = output.rstrip().splitlines()
        assert said[-2].endswith("(different code on the workers)")
        # Then the same line as data, for a saved log (trainer.contract.console).
        assert json.loads(said[-1]) == {"event": "failed", "exit_code": 2, "reason": said[-2]}
        assert "training\n" not in output


def test_a_project_directory_that_is_not_one_is_a_config_error(cluster, tmp_path):
    code, output, _ = finish(cluster(0, TFCLUSTER_PROJECT_DIR=str(tmp_path / "nothing")))
    assert code == ExitCode.CONFIG_ERROR
    assert output == f"trainer: config error: `TFCLUSTER_PROJECT_DIR` ('{tmp_path}/nothing') is not a directory\n"


# -- a peer that ended well is never lost ---------------------------------------------------------

ENDS_IN_6S = [sys.executable, "-c", "import time; time.sleep(6); print('trained', flush=True)"]


def test_a_peer_that_ended_seconds_earlier_is_not_lost(cluster):
    """Its launcher serves its final state until the slower worker has seen it."""
    workers = [cluster(0, ENDS_IN_6S), cluster(1, [sys.executable, "-c", "print('trained')"])]
    code, output, elapsed = finish(workers[1])
    assert code == 0, output
    code, output, _ = finish(workers[0])
    assert code == 0, output
    assert "lost peer" not in output
    assert "trained" in output


# Two names of this machine, so that each worker has a status file of its own in one results
# directory, each launcher on a side port of its own.
TWO_HOSTS = "rendezvous.rendezvous_port = lambda cluster, position, base: base + position"
# The peer's launcher is gone the moment it ends, never serving how it ended: as if the slower
# worker, busy training, had not asked in time.
GONE_UNSEEN = """
lingering.LINGER = 0
serve = rendezvous.Server.set_state
rendezvous.Server.set_state = lambda server, state: None if state.startswith("exited") else serve(server, state)
"""


def two_hosts(cluster, results_dir, *, peer_exit: int, survivor: list[str], grace: float = 10.0):
    """worker-0 (127.0.0.1) runs `survivor`; worker-1 (localhost) exits `peer_exit` after 1 s, unseen."""
    hosts = f"127.0.0.1:{cluster.ports[0]},localhost:{cluster.ports[1]}"
    common = {"TF_WORKER_HOSTS": hosts, "TF_RESULTS_DIR": str(results_dir)}
    # A second's wait, so that worker-0 has seen worker-1 agree before it is gone.
    peer = [sys.executable, "-c", f"import time; time.sleep(1); raise SystemExit({peer_exit})"]
    survivor_patches = f"{TWO_HOSTS}\nwatchdog.FAILED_PEER_GRACE = {grace}"
    workers = [
        cluster(0, survivor, patches=survivor_patches, **common),
        cluster(1, peer, patches=TWO_HOSTS + GONE_UNSEEN, **common),
    ]
    assert finish(workers[1])[0] == peer_exit
    return finish(workers[0])


def test_a_peer_gone_before_a_heartbeat_saw_it_end_well_is_finished_by_its_recorded_status(cluster, tmp_path):
    code, output, _ = two_hosts(cluster, tmp_path, peer_exit=0, survivor=ENDS_IN_6S)
    assert code == 0, output
    assert "lost peer" not in output
    peer = f"localhost:{cluster.ports[1]}"
    assert f"peer {peer} is gone, having ended well (exit 0, as its recorded status says)" in output
    assert recorded_status(tmp_path, "127.0.0.1")["exit_code"] == 0


def test_a_peer_gone_before_a_heartbeat_saw_it_fail_is_lost_by_its_recorded_status(cluster, tmp_path):
    code, output, _ = two_hosts(cluster, tmp_path, peer_exit=1, survivor=SLEEPER, grace=0.5)
    assert code == ExitCode.PEER_LOST, output
    peer = f"localhost:{cluster.ports[1]}"
    assert f"lost peer {peer}: exited 1 (its recorded status)\n" in output
    assert f"stopped: lost peer(s) {peer} (exited 1 (its recorded status))" in output


def test_peers_are_asked_often_while_meeting_and_less_often_in_larger_clusters():
    from trainer.launcher.barrier import meeting_interval

    assert meeting_interval(1) == 0.05
    assert meeting_interval(3) == pytest.approx(0.15)
    assert meeting_interval(4) == 0.2
    assert meeting_interval(15) == 0.2


# -- the pieces on their own ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "exit_code"),
    [
        (ShapingMissed("x"), ExitCode.CONFIG_ERROR),
        (TopologyMismatch("x"), ExitCode.CONFIG_ERROR),
        (PeerNeverJoined("x"), ExitCode.PEER_NEVER_JOINED),
        (PeerLost("x"), ExitCode.PEER_LOST),
        (DeadlineExceeded("x"), ExitCode.DEADLINE_EXCEEDED),
    ],
)
def test_a_failure_carries_its_exit_code_and_message(failure, exit_code):
    assert isinstance(failure, LaunchFailure)
    assert (failure.exit_code, failure.message, str(failure)) == (exit_code, "x", "x")


def test_a_signal_is_a_failure_too_and_a_second_one_changes_nothing():
    stop = StopRequest()
    stop.check()  # Nothing requested: nothing raised.
    assert stop.request(signal.SIGTERM) is True
    assert stop.request(signal.SIGINT) is False
    with pytest.raises(Stopped) as raised:
        stop.pause(60)  # At once: the request is already there.
    assert (raised.value.exit_code, raised.value.message) == (ExitCode.TERMINATED, "stopped by SIGTERM")


class StandInWatch:
    """What the barrier and the watchdog read of a peer's watch, without a thread asking anyone."""

    def __init__(self, position: int, observation: Observation | None):
        self.position = position
        self.address = f"worker-{position}:12345"
        self.latest = observation
        self.interval = 0.05
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    def ask_every(self, interval: float) -> None:
        self.interval = interval


class StandInServer:
    def __init__(self):
        self.states = []

    def set_state(self, state: str) -> None:
        self.states.append(state)


WORKERS = ("worker-0:12345", "worker-1:12345")


def barrier(watches, *, join_timeout=30.0, stop=None):
    """A barrier with stand-ins around it, the server it tells its state, and the lines it said."""
    server, said = StandInServer(), []
    meeting = Barrier(
        fingerprint=Fingerprint(workers=WORKERS, index=0, settings={"TRAIN_SEED": 7}),
        watches=watches,
        server=server,
        me=WORKERS[0],
        join_timeout=join_timeout,
        stop=stop or StopRequest(),
        say=said.append,
    )
    return meeting, server, said


def test_the_barrier_names_a_peer_with_other_settings():
    theirs = Fingerprint(workers=WORKERS, index=1, settings={"TRAIN_SEED": 8})
    meeting, _, _ = barrier([StandInWatch(1, Observation(theirs, "waiting", None, 0))])
    with pytest.raises(TopologyMismatch) as raised:
        meeting.meet(program_ended=lambda: False)
    assert raised.value.exit_code == ExitCode.CONFIG_ERROR
    assert raised.value.message == "topology mismatch: TRAIN_SEED differs: worker-0:12345 has 7, worker-1:12345 has 8"


def test_the_barrier_lets_through_once_every_peer_has_agreed_too():
    theirs = Fingerprint(workers=WORKERS, index=1, settings={"TRAIN_SEED": 7})
    meeting, server, said = barrier([StandInWatch(1, Observation(theirs, "agreed", None, 0))])
    meeting.meet(program_ended=lambda: False)
    assert server.states[-1] == "agreed"
    assert said[0] == "waiting for 1 peer(s), up to 30s"
    assert said[1].startswith("all 2 workers agree on the cluster and settings after ")


def test_the_barrier_gives_up_on_a_silent_peer_at_the_join_deadline_and_on_a_signal():
    silent = StandInWatch(1, None)
    meeting, _, _ = barrier([silent], join_timeout=0.2)
    with pytest.raises(PeerNeverJoined) as raised:
        meeting.meet(program_ended=lambda: False)
    assert raised.value.message == "peer(s) never joined within the 0s join deadline: worker-1:12345 (no answer yet)"
    stop = StopRequest()
    threading.Timer(0.1, stop.request, args=(signal.SIGINT,)).start()
    meeting, _, _ = barrier([silent], stop=stop)
    with pytest.raises(Stopped, match="stopped by SIGINT"):
        meeting.meet(program_ended=lambda: False)


def watchdog(watches, *, run_timeout=60.0):
    """A watchdog over stand-in watches, the times it stopped the program, and the lines it said."""
    stops, said = [], []
    guard = Watchdog(
        watches=watches, run_timeout=run_timeout, stop_program=lambda: stops.append("stop"), say=said.append
    )
    return guard, stops, said


def test_the_watchdog_stops_and_joins_and_leaves_a_program_alone_until_then():
    guard, stops, _ = watchdog([StandInWatch(1, Observation(None, "running", None, 0))])
    guard.start()
    time.sleep(0.2)  # Several rounds of looking at the peers.
    guard.stop()
    guard.join()
    assert "watchdog" not in [thread.name for thread in threading.enumerate()]
    assert (guard.failure, guard.lost, stops) == (None, {}, [])


def test_the_watchdog_stops_the_program_at_the_run_deadline():
    guard, stops, _ = watchdog([], run_timeout=0.1)
    guard.start()
    guard.join()  # It ends by itself once it has stopped the program.
    assert stops == ["stop"]
    assert isinstance(guard.failure, DeadlineExceeded)
    assert guard.failure.message == "still running at the 0s run deadline: stopped"


def test_the_watchdog_stops_the_program_a_grace_after_a_peer_failed_but_not_for_one_that_finished(monkeypatch):
    monkeypatch.setattr(watchdog_module, "FAILED_PEER_GRACE", 0.1)
    finished = StandInWatch(1, Observation(None, "exited 0", None, 0))
    failed = StandInWatch(2, Observation(None, "exited 1", None, 0))
    guard, stops, said = watchdog([finished, failed])
    guard.start()
    guard.join()
    assert (guard.finished, finished.stopped) == ({1}, True)
    assert guard.lost == {"worker-2:12345": "exited 1"}
    assert said == ["lost peer worker-2:12345: exited 1"]
    assert stops == ["stop"]
    assert isinstance(guard.failure, PeerLost)
    assert (guard.failure.exit_code, guard.failure.message) == (
        ExitCode.PEER_LOST,
        "stopped: lost peer(s) worker-2:12345 (exited 1)",
    )


def test_the_watchdog_counts_a_silent_peer_that_recorded_a_successful_exit_as_finished():
    gone = StandInWatch(1, Observation(None, "running", "name not resolvable", 3))
    stops, said = [], []
    recorded = {"worker-1:12345": 0}
    guard = Watchdog(
        watches=[gone],
        run_timeout=60,
        stop_program=lambda: stops.append("stop"),
        say=said.append,
        recorded_exit=recorded.get,
    )
    guard.start()
    time.sleep(0.2)
    guard.stop()
    guard.join()
    assert (guard.finished, guard.lost, stops, gone.stopped) == ({1}, {}, [], True)
    assert said == ["peer worker-1:12345 is gone, having ended well (exit 0, as its recorded status says)"]


@pytest.mark.parametrize(
    ("recorded", "reason"),
    [(1, "exited 1 (its recorded status)"), (None, "name not resolvable (3 heartbeats missed)")],
)
def test_the_watchdog_loses_a_silent_peer_that_recorded_a_failure_or_nothing(monkeypatch, recorded, reason):
    monkeypatch.setattr(watchdog_module, "FAILED_PEER_GRACE", 0.1)
    monkeypatch.setattr(watchdog_module, "LOST_PEER_GRACE", 0.1)
    gone = StandInWatch(1, Observation(None, "running", "name not resolvable", 3))
    stops, said = [], []
    guard = Watchdog(
        watches=[gone],
        run_timeout=60,
        stop_program=lambda: stops.append("stop"),
        say=said.append,
        recorded_exit=lambda address: recorded,
    )
    guard.start()
    guard.join()  # It ends by itself once it has stopped the program.
    assert (guard.finished, guard.lost, stops) == (set(), {"worker-1:12345": reason}, ["stop"])
    assert said == [f"lost peer worker-1:12345: {reason}"]


def test_a_peer_whose_last_answer_was_a_successful_exit_is_finished_though_it_no_longer_answers():
    # Its end was seen, then it was gone before the watchdog looked: how it ended stays known.
    gone = StandInWatch(1, Observation(None, "exited 0", "resolvable, not listening yet", 3))
    guard, stops, said = watchdog([gone])
    guard.start()
    time.sleep(0.2)
    guard.stop()
    guard.join()
    assert (guard.finished, guard.lost, stops, said) == ({1}, {}, [], [])


def watched_server(state: str, *, interval: float) -> tuple[Server, PeerWatch]:
    """A peer's rendezvous server in `state`, and this worker's watch of it asking every `interval` seconds."""
    port = free_port()
    server = Server(Fingerprint(workers=WORKERS, index=1, settings={}), port)
    server.set_state(state)
    return server, PeerWatch(position=1, address="127.0.0.1:1", port=port, me=0, timeout=1.0, interval=interval)


def until(condition, seconds: float = 5) -> None:
    """Returns once `condition()` holds, or after `seconds` (the caller's assertion says which)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_watch_asks_no_more_once_a_peer_has_said_how_it_ended():
    server, watch = watched_server("exited 0", interval=0.05)
    try:
        until(lambda: watch.latest is not None and watch.latest.state == "exited 0")
    finally:
        server.close()
    time.sleep(0.3)  # Six more questions' time, had it gone on asking the closed port.
    assert watch.latest == Observation(watch.latest.fingerprint, "exited 0", None, 0)
    watch.stop()


def test_a_watch_told_to_ask_more_often_asks_at_once_and_a_closed_server_ends_at_once():
    server, watch = watched_server("running", interval=30.0)
    try:
        until(lambda: watch.latest is not None)
        assert watch.latest.state == "running"
        server.set_state("exited 0")
        started = time.monotonic()
        watch.ask_every(0.2)  # Asleep for 30 s under the old interval: woken, not left to it.
        until(lambda: watch.latest.state == "exited 0")
        assert watch.latest.state == "exited 0"
        assert time.monotonic() - started < 1.0
    finally:
        watch.stop()
        started = time.monotonic()
        server.close()
        # The serving loop is looked at often (socketserver's default would take up to 0.5 s).
        assert time.monotonic() - started < 0.3


@pytest.mark.parametrize(("recorded", "lost"), [(0, None), (None, "resolvable, not listening yet"), (3, "exited 3")])
def test_after_a_failure_a_gone_peer_is_lost_unless_it_recorded_a_successful_exit(recorded, lost):
    gone = StandInWatch(1, Observation(None, "running", None, 0))
    gone.address, gone.port = f"127.0.0.1:{free_port()}", free_port()  # Nothing listens there.
    arguments = {"lost": {}, "watches": [gone], "finished": set(), "me": 0, "recorded_exit": lambda _: recorded}
    if lost is None:
        assert judge(1, **arguments) == 1  # The program's own failure: the launcher has nothing to add.
        return
    with pytest.raises(
        PeerLost, match=f"^training program exited 1 after losing peer\\(s\\): {gone.address} \\({lost}"
    ):
        judge(1, **arguments)


# -- the linger --------------------------------------------------------------------------------


class SeenBy:
    """What the linger asks of the server: who has fetched the final state (set by the test)."""

    def __init__(self):
        self.seen: set[int] = set()

    def wait_until_seen(self, peers: set[int], timeout: float) -> bool:
        if not peers <= self.seen:
            time.sleep(timeout)
        return peers <= self.seen


def timed_linger(watches, server, *, timeout=5.0, stop=None) -> float:
    started = time.monotonic()
    linger(server=server, watches=watches, stop=stop or StopRequest(), timeout=timeout)
    return time.monotonic() - started


def test_the_linger_lasts_until_a_live_peer_has_seen_the_final_state():
    running, server = StandInWatch(1, Observation(None, "running", None, 0)), SeenBy()
    threading.Timer(0.3, server.seen.add, args=(1,)).start()
    assert 0.3 <= timed_linger([running], server) < 1.5
    assert running.interval == lingering.POLL_INTERVAL  # Asked more often meanwhile.


def test_the_linger_lasts_until_a_live_peer_has_ended_itself():
    running = StandInWatch(1, Observation(None, "running", None, 0))
    threading.Timer(0.3, setattr, args=(running, "latest", Observation(None, "exited 1", None, 0))).start()
    assert 0.3 <= timed_linger([running], SeenBy()) < 1.5


def test_the_linger_waits_for_no_peer_that_cannot_ask_and_ends_at_its_bound_or_a_signal():
    cannot_ask = [
        StandInWatch(1, None),  # Never met.
        StandInWatch(2, Observation(None, "running", "name not resolvable", 3)),  # Lost.
        StandInWatch(3, Observation(None, "exited 0", None, 0)),  # Ended.
    ]
    assert timed_linger(cannot_ask, SeenBy()) < 0.5
    never_asks = [StandInWatch(1, Observation(None, "running", None, 0))]
    assert 0.3 <= timed_linger(never_asks, SeenBy(), timeout=0.3) < 1.0
    stop = StopRequest()
    threading.Timer(0.2, stop.request, args=(signal.SIGTERM,)).start()
    assert timed_linger(never_asks, SeenBy(), stop=stop) < 1.0


def test_the_linger_lasts_as_long_as_a_peer_takes_to_count_a_silent_worker_lost():
    assert lingering.LINGER == HEARTBEAT_MISSES * (HEARTBEAT_TIMEOUT + watchdog_module.HEARTBEAT_INTERVAL) == 9.0


def test_a_program_that_leaves_a_child_holding_its_output_ends_when_it_does(cluster):
    # The child would keep the output pipe open for 60 s; the launcher must not wait for it.
    leaves_a_child = [sys.executable, "-c", "import subprocess; subprocess.Popen(['sleep', '60']); print('done')"]
    worker = cluster(0, leaves_a_child, TF_WORKER_HOSTS="127.0.0.1")
    code, output, elapsed = finish(worker)
    assert code == 0, output
    assert "done\n" in output
    assert elapsed < 10

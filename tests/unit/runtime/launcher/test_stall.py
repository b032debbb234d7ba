"""The stall watchdog and memory blame, from stand-in peers and health, and two real launchers on loopback."""

import os
import sys
import time

import pytest
from test_supervisor import StandInWatch

from tests.unit.conftest import finish
from trainer.contract import stacks
from trainer.contract.exitcodes import ExitCode
from trainer.launcher import watchdog as watchdog_module
from trainer.launcher.cgroup import Memory
from trainer.launcher.failures import OutOfMemory, PeerLost, Stall
from trainer.launcher.health import Health
from trainer.launcher.peers import Observation
from trainer.launcher.watchdog import Watchdog

MiB = 2**20


class StandInHealth(Health):
    """A health whose idle time and memory a test sets: sampling changes nothing."""

    def __init__(self, *, idle=0.0, pressed_at=None, thrashing=0.0):
        super().__init__(read_memory=_memory)
        self.idle = idle
        self._pressed_at = pressed_at
        self._thrashing = thrashing

    def sample(self, now):
        pass

    def thrashing_for(self, now):
        return self._thrashing


def _memory():
    return Memory(limit=250 * MiB, peak=250 * MiB, limit_hits=0, oom_kills=0, major_faults=0)


def peer(position, *, idle=None, state="running", stalled=False, unavailable=None, misses=0):
    health = {} if idle is None else {"idle_seconds": idle, "stalled": stalled}
    return StandInWatch(position, Observation(None, state, unavailable, misses, health))


def guard(watches, health, *, stall_timeout=20.0):
    """A watchdog over stand-ins; what it did: stops, stack dumps and lines said, in order."""
    did = []
    dog = Watchdog(
        watches=watches,
        run_timeout=60,
        stop_program=lambda: did.append("stop"),
        say=did.append,
        health=health,
        stall_timeout=stall_timeout,
        dump_stacks=lambda: did.append("dump"),
    )
    return dog, did


def run_briefly(dog):
    dog.start()
    deadline = time.monotonic() + 0.5
    while dog.failure is None and time.monotonic() < deadline:
        time.sleep(0.05)
    dog.stop()
    dog.join()


def test_every_worker_idle_past_the_bound_is_a_stall_dumped_before_the_program_is_stopped():
    health = StandInHealth(idle=21.0)
    dog, did = guard([peer(1, idle=20.5), peer(2, idle=25.0)], health)
    run_briefly(dog)
    assert isinstance(dog.failure, Stall) and dog.failure.exit_code == ExitCode.STALLED == 10
    message = (
        "stalled: no worker's program made progress for 20s "
        "(idle: this worker 21s, worker-1:12345 20s, worker-2:12345 25s)"
    )
    assert dog.failure.message == message
    assert did == [f"{message}: its program's stack follows", "dump", "stop"]
    assert health.to_record()["stalled"] is True  # Served to the peers, which join the stall.


@pytest.mark.parametrize(
    ("own_idle", "peers"),
    [
        (19.9, [20.0, 30.0]),  # This worker is busy.
        (25.0, [20.0, 3.0]),  # One peer is busy: the others wait for it, which is no stall.
        (25.0, [20.0, None]),  # One peer says nothing of its progress (another launcher): unknown.
    ],
)
def test_no_stall_while_any_worker_makes_progress_or_may_be(own_idle, peers):
    dog, did = guard(
        [peer(position, idle=idle) for position, idle in enumerate(peers, start=1)], StandInHealth(idle=own_idle)
    )
    run_briefly(dog)
    assert (dog.failure, did) == (None, [])


def test_a_finished_peer_does_not_hold_off_a_stall_of_the_others():
    finished = peer(1, state="exited 0")
    dog, _ = guard([finished, peer(2, idle=30.0)], StandInHealth(idle=30.0))
    run_briefly(dog)
    assert isinstance(dog.failure, Stall)


def test_a_peer_that_declared_a_stall_is_joined_at_once_whatever_this_workers_idle_time():
    dog, did = guard([peer(1, idle=20.0, stalled=True)], StandInHealth(idle=2.0))
    run_briefly(dog)
    assert isinstance(dog.failure, Stall)
    assert dog.failure.message == "stalled: worker-1:12345 found no worker making progress for 20s"
    assert did[1:] == ["dump", "stop"]
    # A peer that has already ended stalled is joined too, not counted as lost.
    dog, _ = guard([peer(1, state="exited 10")], StandInHealth(idle=2.0))
    run_briefly(dog)
    assert isinstance(dog.failure, Stall) and dog.lost == {}


def test_peers_lost_while_this_worker_was_at_its_memory_limit_are_blamed_on_memory(monkeypatch):
    monkeypatch.setattr(watchdog_module, "LOST_PEER_GRACE", 0.1)
    silent = peer(1, idle=0.0, unavailable="resolvable, no answer within 2s", misses=3)
    dog, _ = guard([silent], StandInHealth(pressed_at=time.monotonic()))
    run_briefly(dog)
    assert isinstance(dog.failure, OutOfMemory) and dog.failure.exit_code == ExitCode.OUT_OF_MEMORY == 9
    assert dog.failure.message.startswith("out of memory: at its 250 MiB memory limit (peak 250 MiB) the program")
    assert (
        "lost its peer(s) worker-1:12345 (resolvable, no answer within 2s (3 heartbeats missed))" in dog.failure.message
    )
    # Long after the limit was last reached, a lost peer is only that.
    silent = peer(1, idle=0.0, unavailable="resolvable, no answer within 2s", misses=3)
    dog, _ = guard([silent], StandInHealth(pressed_at=time.monotonic() - 60))
    run_briefly(dog)
    assert isinstance(dog.failure, PeerLost)


def test_thrashing_past_the_limit_stops_the_program_as_out_of_memory():
    dog, did = guard([peer(1, idle=0.0)], StandInHealth(thrashing=watchdog_module.THRASHING_LIMIT))
    run_briefly(dog)
    assert isinstance(dog.failure, OutOfMemory)
    assert dog.failure.message.startswith("out of memory: thrashing at its 250 MiB memory limit (peak 250 MiB)")
    assert did == ["stop"]


# Both stand-in programs wait in the same function, as workers waiting on a collective would.
WAITER = (
    "import time\n"
    "def wait_for_a_collective():\n"
    "    time.sleep(600)\n"
    "print('waiting', flush=True)\n"
    "wait_for_a_collective()\n"
)


def test_two_launchers_whose_programs_wait_dump_their_stacks_and_stop_within_the_bound(cluster, tmp_path):
    # The image loads the stack hook into every Python program; here the stand-in loads it itself.
    program = [sys.executable, "-c", f"from trainer.contract import stacks; stacks.install()\n{WAITER}"]
    bound = 3.0
    started = time.monotonic()
    workers = [cluster(index, program, TF_STALL_TIMEOUT=str(bound), PYTHONPATH=os.getcwd()) for index in (0, 1)]
    outputs = [finish(worker) for worker in workers]
    for code, output, _ in outputs:
        assert code == ExitCode.STALLED, output
        assert "stalled: " in output
        assert "line 4 in wait_for_a_collective" in output  # Its stack, dumped before it was stopped.
        assert output.index("stalled: ") < output.index("wait_for_a_collective") < output.index("training program used")
    # The bound, plus a sample, a heartbeat, the dump's settling and the stop.
    assert time.monotonic() - started < bound + 8
    assert stacks.VARIABLE == "TFCLUSTER_STACK_DUMPS"

"""A worker's health: the cgroup's counters (v1 and v2), memory pressure, thrashing, and how a lost peer is named."""

import os

import pytest

from trainer.launcher import cgroup
from trainer.launcher.health import THRASHING_FAULTS, Health, MemoryState, peer_trouble

MiB = 2**20


def write(root, files: dict[str, str]):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_cgroup_v2_counters_are_read(tmp_path):
    root = write(
        tmp_path,
        {
            "cgroup.controllers": "cpu memory pids\n",
            "memory.max": f"{250 * MiB}\n",
            "memory.peak": f"{249 * MiB}\n",
            "memory.events": "low 0\nhigh 0\nmax 17\noom 1\noom_kill 1\noom_group_kill 0\n",
            "memory.stat": "anon 1\nfile 2\npgmajfault 4400\n",
            "cpu.max": "25000 100000\n",
        },
    )
    assert cgroup.memory(root) == cgroup.Memory(
        limit=250 * MiB, peak=249 * MiB, limit_hits=17, oom_kills=1, major_faults=4400
    )
    assert cgroup.cpu_limit(root) == 0.25


def test_cgroup_v1_counters_are_read(tmp_path):
    root = write(
        tmp_path,
        {
            "memory/memory.limit_in_bytes": f"{250 * MiB}\n",
            "memory/memory.max_usage_in_bytes": f"{250 * MiB}\n",
            "memory/memory.failcnt": "2878231\n",
            "memory/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
            "memory/memory.stat": "pgmajfault 10\ntotal_pgmajfault 153473\n",
            "cpu/cpu.cfs_quota_us": "50000\n",
            "cpu/cpu.cfs_period_us": "100000\n",
        },
    )
    assert cgroup.memory(root) == cgroup.Memory(
        limit=250 * MiB, peak=250 * MiB, limit_hits=2878231, oom_kills=2, major_faults=153473
    )
    assert cgroup.cpu_limit(root) == 0.5


def test_no_limit_and_unreadable_counters_are_none_and_the_cpus_are_the_machines(tmp_path):
    v2 = write(tmp_path / "v2", {"cgroup.controllers": "", "memory.max": "max\n", "cpu.max": "max 100000\n"})
    assert cgroup.memory(v2) == cgroup.Memory(limit=None, peak=None, limit_hits=None, oom_kills=None, major_faults=None)
    cores = len(os.sched_getaffinity(0))
    assert cgroup.cpu_limit(v2) == cores
    v1 = write(
        tmp_path / "v1",
        {"memory/memory.limit_in_bytes": "9223372036854771712\n", "cpu/cpu.cfs_quota_us": "-1\n"},
    )
    assert cgroup.memory(v1).limit is None
    assert cgroup.cpu_limit(v1) == cores
    # A quota above the cores the container may run on is no more than those cores.
    many = write(tmp_path / "many", {"cgroup.controllers": "", "cpu.max": f"{(cores + 4) * 100000} 100000\n"})
    assert cgroup.cpu_limit(many) == cores


class Counters:
    """A cgroup whose counters a test sets between samples."""

    def __init__(self, **values):
        self.values = {"limit": 250 * MiB, "peak": 100 * MiB, "limit_hits": 0, "oom_kills": 0}
        self.values["major_faults"] = 0
        self.values.update(values)

    def __call__(self) -> cgroup.Memory:
        return cgroup.Memory(**self.values)


def test_memory_is_pressed_only_in_a_sample_where_usage_reached_the_limit_again():
    counters = Counters(limit_hits=5)  # Hits from before the launcher started count for nothing.
    health = Health(read_memory=counters)
    health.sample(1.0)
    assert health.memory.pressed is False
    counters.values.update(limit_hits=9, peak=250 * MiB)
    health.sample(2.0)
    assert health.memory.pressed is True
    assert health.memory.describe() == "its 250 MiB memory limit (peak 250 MiB)"
    assert health.pressed_within(30, now=31.0) and not health.pressed_within(30, now=33.0)
    health.sample(3.0)
    assert health.memory.pressed is False


def test_an_oom_kill_since_the_launcher_started_is_counted_and_earlier_ones_are_not():
    counters = Counters(oom_kills=3)
    health = Health(read_memory=counters)
    health.sample(1.0)
    assert health.memory.oom_kills == 0
    counters.values["oom_kills"] = 4
    health.sample(2.0)
    assert (health.memory.oom_kills, health.memory.pressed) == (1, True)
    assert health.to_record()["memory"] == {"limit": 250 * MiB, "peak": 100 * MiB, "pressed": True, "oom_kills": 1}


def test_thrashing_is_many_major_faults_a_second_at_the_limit_without_a_break():
    counters = Counters()
    health = Health(read_memory=counters)
    health.sample(0.0)

    def second(now, *, faults_a_second, hit_limit):
        counters.values["major_faults"] += faults_a_second
        counters.values["limit_hits"] += 1 if hit_limit else 0
        health.sample(now)

    second(1.0, faults_a_second=THRASHING_FAULTS * 10, hit_limit=False)  # Importing TensorFlow, with room.
    assert health.thrashing_for(1.0) == 0
    for now in range(2, 13):
        second(float(now), faults_a_second=THRASHING_FAULTS + 1, hit_limit=True)
    assert health.thrashing_for(12.0) == 10.0
    assert health.fault_rate == THRASHING_FAULTS + 1
    second(13.0, faults_a_second=THRASHING_FAULTS - 1, hit_limit=True)  # A break ends it.
    assert health.thrashing_for(13.0) == 0


@pytest.mark.parametrize(
    ("state", "memory", "unavailable", "named"),
    [
        ("exited 9", {"limit": 250 * MiB, "peak": 250 * MiB, "pressed": True, "oom_kills": 1}, None,
         "exited 9: out of memory at its 250 MiB memory limit (peak 250 MiB)"),
        ("exited 9", None, None, "exited 9: out of memory"),
        ("exited 10", None, None, "exited 10: stalled"),
        ("exited 1", {"limit": None, "peak": 5, "pressed": False, "oom_kills": 0}, None, "exited 1"),
        ("running", {"limit": 250 * MiB, "peak": 250 * MiB, "pressed": True, "oom_kills": 0},
         "resolvable, no answer within 2s (3 heartbeats missed)",
         "resolvable, no answer within 2s (3 heartbeats missed); its last heartbeat said it was at "
         "its 250 MiB memory limit (peak 250 MiB): out of memory"),
        ("running", {"limit": 250 * MiB, "peak": 20 * MiB, "pressed": False, "oom_kills": 0},
         "name not resolvable (3 heartbeats missed)", "name not resolvable (3 heartbeats missed)"),
    ],
)  # fmt: skip
def test_a_lost_peer_is_named_with_its_memory_when_that_explains_it(state, memory, unavailable, named):
    health = {} if memory is None else {"memory": memory}
    assert peer_trouble(state, health, unavailable=unavailable) == named


def test_a_memory_record_of_another_shape_is_no_memory_state():
    assert MemoryState.from_record("full") is None
    assert MemoryState.from_record({"oom_kills": "many"}) is None

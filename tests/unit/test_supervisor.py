"""The launcher's fail-fast behaviour, with real launcher processes on loopback and stand-in
training programs (no TensorFlow, no Docker): mismatches, absent and lost peers, deadlines."""

import signal
import sys

import pytest

from tests.conftest import free_port
from tests.unit.conftest import finish
from trainer.contract.exitcodes import ExitCode


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
    other = f"127.0.0.1:{cluster.ports[0]},127.0.0.1:{cluster.ports[1]},127.0.0.1:{free_port()}"
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


def test_a_lost_peer_stops_the_survivor_naming_it(cluster):
    workers = [cluster(0), cluster(1)]
    for worker in workers:
        for line in worker.stdout:
            if line.startswith("training"):
                break
    workers[1].kill()  # SIGKILL: no goodbye, as with `docker kill`.
    code, output, elapsed = finish(workers[0])
    assert code == ExitCode.PEER_LOST, output
    assert f"lost peer 127.0.0.1:{cluster.ports[1]}: resolvable, not listening yet" in output
    assert elapsed < 20


def test_the_run_deadline_stops_a_program_that_runs_too_long(cluster):
    worker = cluster(0, TF_WORKER_HOSTS="127.0.0.1", TF_RUN_TIMEOUT="3")
    code, output, elapsed = finish(worker)
    assert code == ExitCode.DEADLINE_EXCEEDED, output
    assert "still running at the 3s run deadline: stopped" in output
    assert elapsed < 3 + 5


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


def test_a_failed_training_check_is_reported_as_such_after_the_peer_has_gone(cluster):
    finishes_well = [sys.executable, "-c", "print('trained')"]
    fails_its_check_later = [sys.executable, "-c", "import time; time.sleep(5); raise SystemExit(3)"]
    workers = [cluster(0, finishes_well), cluster(1, fails_its_check_later)]
    assert finish(workers[0])[0] == 0
    code, output, _ = finish(workers[1])
    assert code == ExitCode.TRAINING_CHECK_FAILED, output  # Not "peer lost": the peer ended well.


def test_peers_are_asked_often_while_meeting_and_less_often_in_larger_clusters():
    from trainer.launcher.supervisor import meeting_interval

    assert meeting_interval(1) == 0.05
    assert meeting_interval(3) == pytest.approx(0.15)
    assert meeting_interval(4) == 0.2
    assert meeting_interval(15) == 0.2

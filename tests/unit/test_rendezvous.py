from trainer.contract.cluster import from_template
from trainer.contract.settings import TrainingSettings
from trainer.launcher.rendezvous import Fingerprint, differences, rendezvous_port


def fingerprint(hosts="worker-0,worker-1", index=0, **settings):
    return Fingerprint.of(from_template(hosts, index), TrainingSettings(**settings))


def compare(mine, theirs, expected_index=1):
    return differences(mine, theirs, me="worker-0:12345", peer="worker-1:12345", expected_index=expected_index)


def test_identical_configurations_agree():
    assert compare(fingerprint(), fingerprint(index=1)) == []


def test_each_differing_field_is_named_with_both_values():
    assert compare(fingerprint(), fingerprint("worker-0,worker-1,worker-2", 1)) == [
        "worker count differs: worker-0:12345 has 2, worker-1:12345 has 3"
    ]
    assert compare(fingerprint(), fingerprint("worker-0,worker-1:2222", 1)) == [
        "port of worker-1 differs: worker-0:12345 has worker-1:12345, worker-1:12345 has worker-1:2222"
    ]
    assert compare(fingerprint(), fingerprint("worker-0,worker-9", 1)) == [
        "worker 1's host differs: worker-0:12345 has worker-1, worker-1:12345 has worker-9"
    ]
    assert compare(fingerprint(), fingerprint(index=1, per_worker_batch_size=32, seed=8)) == [
        "TRAIN_BATCH_SIZE differs: worker-0:12345 has 16, worker-1:12345 has 32",
        "TRAIN_SEED differs: worker-0:12345 has 7, worker-1:12345 has 8",
    ]


def test_a_peer_claiming_another_index_is_named():
    assert compare(fingerprint(), fingerprint(index=0)) == [
        "worker-1:12345 says it is worker 0 (TF_TASK_INDEX), but it is worker 1 in the cluster list"
    ]


def test_side_ports_are_shared_across_hosts_and_distinct_on_one_host():
    containers = from_template("worker-0,worker-1", 0)
    assert [rendezvous_port(containers, position, 12399) for position in (0, 1)] == [12399, 12399]
    loopback = from_template("127.0.0.1:1,127.0.0.1:2,127.0.0.2:3", 0)
    assert [rendezvous_port(loopback, position, 12399) for position in (0, 1, 2)] == [12399, 12400, 12399]


def test_the_accuracy_pass_mark_is_each_workers_own():
    assert compare(fingerprint(), fingerprint(index=1, min_accuracy=0.9)) == []

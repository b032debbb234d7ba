"""Which failure started it (trainer/verifier/causes.py): the order of the problems, and one error said once."""

import dataclasses

from trainer.verifier.causes import Cause, also_lost, in_order, of_exit, of_saved_log, same_error
from trainer.verifier.worker_log import read

NAMES = ["worker-0", "worker-1", "worker-10"]


@dataclasses.dataclass(frozen=True)
class Failed:
    name: str
    problem: str | None
    cause: Cause = Cause.OWN
    error: str | None = None


def test_the_same_error_masks_only_what_differs_between_workers():
    def on(index):
        return (
            f"UnavailableError: worker-{index}:12345 at /job:worker/replica:0/task:{index} "
            f"(<Var object at 0x7f3a{index}c>) in /out/worker-{index}"
        )

    assert same_error(on(0), NAMES) == same_error(on(1), NAMES) == same_error(on(10), NAMES)
    assert "worker-10" not in same_error(on(10), NAMES) and "worker-" not in same_error(on(10), NAMES)
    # Any other figure is part of the error.
    assert same_error("ValueError: got shape (32,)", NAMES) != same_error("ValueError: got shape (16,)", NAMES)
    # A name is a whole name: worker-1 in worker-10, or in a longer word, is not masked as worker-1.
    assert same_error("KeyError: 'worker-1x'", NAMES) == "KeyError: 'worker-1x'"


def test_problems_come_by_cause_and_in_the_workers_order_within_each():
    workers = [
        Failed("worker-0", "exited 5: lost worker-2", Cause.PEER),
        Failed("worker-1", None),
        Failed("worker-2", "exited 5: ValueError: x; it also lost ...", Cause.OWN_AND_PEER, "ValueError: x"),
        Failed("worker-3", "killed"),
        Failed("worker-4", "exited 1: KeyError: 'y'", Cause.OWN, "KeyError: 'y'"),
    ]
    assert in_order(workers, cluster=5) == (
        "worker-3: killed",
        "worker-4: exited 1: KeyError: 'y'",
        "worker-2: exited 5: ValueError: x; it also lost ...",
        "worker-0: exited 5: lost worker-2",
    )


def test_an_error_several_raised_is_said_once_where_the_first_of_them_would_be():
    workers = [
        Failed("worker-0", "exited 5: lost", Cause.PEER),
        Failed("worker-1", "exited 5: RuntimeError: z; ...", Cause.OWN_AND_PEER, "RuntimeError: z"),
        Failed("worker-2", "exited 1: RuntimeError: z", Cause.OWN, "RuntimeError: z"),
    ]
    assert in_order(workers, cluster=3) == (
        "2 of 3 workers (worker-1, worker-2) raised the same error: RuntimeError: z",
        "worker-0: exited 5: lost",
    )
    # Fewer reports than the cluster has: not every worker.
    assert in_order(workers[1:], cluster=3)[0].startswith("2 of 3 workers (worker-1, worker-2) ")
    advice = [Failed(f"worker-{index}", "exited 1: set X", Cause.OWN, "set X=1 to fix it") for index in range(2)]
    assert in_order(advice, cluster=2) == ("every worker (worker-0, worker-1) failed the same way: set X=1 to fix it",)


def test_the_cause_of_an_exit_is_read_from_its_code_first():
    peer_error = "Traceback (most recent call last):\nUnavailableError: Collective ops is aborted by: x\n"
    assert of_exit(5, read(""), raised_own=False) == of_exit(4, read(""), raised_own=False) == Cause.PEER
    assert of_exit(5, read(""), raised_own=True) == Cause.OWN_AND_PEER
    assert of_exit(1, read(""), raised_own=True) == Cause.OWN
    # A program's own exit code with TensorFlow's error for a lost peer: the peer's doing.
    assert of_exit(1, read(peer_error), raised_own=False) == Cause.PEER
    # One of the harness's own codes says what happened, whatever the program raised as it went.
    assert of_exit(9, read(peer_error), raised_own=False) == Cause.OWN


def test_a_saved_logs_cause_is_its_last_failed_event():
    lost = '{"event": "failed", "exit_code": 5, "reason": "launcher | worker-0:12345: stopped: lost peer(s) x"}\n'
    assert of_saved_log(read(lost)) == Cause.PEER
    assert of_saved_log(read(lost + '{"event": "failed", "exit_code": 9, "reason": "out of memory"}\n')) == Cause.OWN
    assert of_saved_log(read("train | epoch: 1\n")) == Cause.OWN


def test_the_lost_clause_names_the_lost_peers_or_says_a_peer_was_lost():
    after = "launcher | worker-0:12345: training program exited 1 after losing peer(s): worker-1:12345 (exited 1)"
    assert also_lost(after) == "; it also lost peer(s) worker-1:12345 (exited 1)"
    assert (
        also_lost("launcher | worker-0:12345: peers gone")
        == "; it also lost a peer: launcher | worker-0:12345: peers gone"
    )
    assert also_lost(None) == "; it also lost a peer"

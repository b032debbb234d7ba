"""The verdict on synchronization, from the observer's records: each check, and that it can say no.

The records are what the observer prints (tests/observations.py), in logs judged as a run's are;
tests/container/test_synchronization.py makes them with real programs and real bugs.
"""

from tests.observations import TRAINED, VARIABLES, drifted, lines, records, state, strategy
from trainer.verifier import render
from trainer.verifier.observed import sessions
from trainer.verifier.verdict import WorkerReport, judge

FIT_LOGS = {"loss": 0.61, "accuracy": 0.64}
HARNESS = ["worker-0:12345", "worker-1:12345"]


def verdict_of(*logs: str, exit_codes=None, cluster=None):
    exit_codes = exit_codes or [0] * len(logs)
    reports = [
        WorkerReport(name=f"worker-{index}", state="exited", exit_code=code, log=log)
        for index, (log, code) in enumerate(zip(logs, exit_codes, strict=True))
    ]
    return judge(reports, expected_workers=len(logs), cluster=cluster)


def fit_log(index: int, *, drift_from: int | None = None, epochs: int = 3, workers: int = 2) -> str:
    """A `fit` program's records: a state at each epoch's end and at the end; its kernel other from `drift_from` on."""
    found = [strategy(index, workers=workers)]
    for epoch in range(1, epochs + 1):
        variables = drifted() if drift_from is not None and epoch >= drift_from else VARIABLES
        found.append(state(index, point="epoch", number=epoch, step=5 * epoch, variables=variables, logs=FIT_LOGS))
    found.append(state(index, step=5 * epochs, variables=found[-1]["variables"]))
    return lines(*found)


def test_identical_states_pass_and_say_what_was_proven():
    verdict = verdict_of(fit_log(0), fit_log(1), cluster=HARNESS)
    assert verdict.passed, verdict.problems
    table = render.table(verdict).splitlines()
    assert table[-3] == (
        "state: bitwise identical on 2 of 2 workers at 4 points, from epoch 1 (step 5) to the end (step 15): "
        "3 variables, 584 B; local to each worker (ON_READ), not compared: binary_accuracy/total"
    )
    assert (
        table[-2]
        == "traffic: while training, every worker sent at least 48.8 KB to its peers and received at least 48.8 KB"
    )
    assert table[-1].endswith("; weights identical at 4 points (3 variables, 584 B)")


def test_a_fit_programs_metrics_come_from_its_epoch_logs():
    verdict = verdict_of(fit_log(0), fit_log(1))
    assert verdict.metrics == {
        "epochs": 3,
        "initial_loss": 0.61,
        "final_loss": 0.61,
        "final_accuracy": 0.64,
        "replicas": 2,
    }


def test_the_first_point_where_a_variable_differs_is_named_with_the_variable_and_the_worker():
    verdict = verdict_of(fit_log(0), fit_log(1, drift_from=2))
    assert not verdict.passed
    assert verdict.problems == (
        "model state differs at epoch 2 (step 10): worker-1 differs from worker-0 in 1 of 3 compared variables: "
        "sequential/dense/kernel",
    )
    assert render.summary(verdict) == "verdict: FAIL: 1 problem(s)"


def test_local_variables_may_differ():
    local_drift = drifted(name="binary_accuracy/total")
    assert verdict_of(records(0), records(1, variables=local_drift)).passed


def test_a_variable_one_worker_lacks_is_named():
    verdict = verdict_of(records(0), records(1, variables=VARIABLES[1:]))
    assert verdict.problems == (
        "model state differs at the end (step 12): worker-1 lacks sequential/dense/kernel, which worker-0 has",
    )


def test_with_three_workers_each_odd_one_is_named():
    verdict = verdict_of(records(0, workers=3), records(1, workers=3, variables=drifted()), records(2, workers=3))
    assert verdict.problems == (
        "model state differs at the end (step 12): worker-1 differs from worker-0 in 1 of 3 compared variables: "
        "sequential/dense/kernel",
    )


def test_trainable_variables_outside_the_strategy_are_named_on_each_worker():
    outside = tuple((n, "outside" if k == "trainable" else k, d, s, h) for n, k, d, s, h in VARIABLES)
    verdict = verdict_of(records(0, variables=outside), records(1, variables=outside))
    assert verdict.problems == tuple(
        f"worker-{index}: 2 trainable variable(s) made outside strategy.scope(), so trained by this worker alone: "
        "sequential/dense/kernel, sequential/dense/bias"
        for index in (0, 1)
    )


def test_a_strategy_with_too_few_replicas_is_named_whatever_the_program_printed():
    printed = '{"event": "final", "replicas": 2, "final_loss": 0.5}\n'
    verdict = verdict_of(printed + records(0, replicas=1), printed + records(1, replicas=1))
    assert verdict.problems[0] == (
        "worker-0: replicas=1, expected 2: its MultiWorkerMirroredStrategy had 1 replica(s) in sync"
    )


def test_a_strategy_of_another_cluster_is_named():
    verdict = verdict_of(records(0, port=2222), records(1, port=2222), cluster=HARNESS)
    assert verdict.problems[0] == (
        "worker-0: its MultiWorkerMirroredStrategy resolved the cluster ['worker-0:2222', 'worker-1:2222'], "
        "not the harness's ['worker-0:12345', 'worker-1:12345']"
    )


def test_a_worker_that_took_itself_for_another_is_named():
    verdict = verdict_of(records(0), lines(strategy(0, session="x"), state(1, session="x")))
    assert verdict.problems == (
        "worker-1: its MultiWorkerMirroredStrategy took it for worker 0 of ['worker-0:12345', 'worker-1:12345'], "
        "not worker-1",
    )


def test_a_chief_as_tfjob_names_it_is_worker_0_of_the_cluster_its_strategy_resolved():
    def as_tfjob(index: int) -> dict:
        record = strategy(index)
        record["cluster"] = {"chief": ["worker-0:12345"], "worker": ["worker-1:12345"]}
        record["task"] = {"type": "chief", "index": 0} if index == 0 else {"type": "worker", "index": 0}
        return record

    logs = [lines(as_tfjob(index), state(index)) for index in (0, 1)]
    assert verdict_of(*logs, cluster=HARNESS).passed
    # The worker whose strategy took it for the chief, though it is worker-1, is named.
    swapped = lines({**as_tfjob(1), "task": {"type": "chief", "index": 0}}, state(1))
    assert verdict_of(logs[0], swapped, cluster=HARNESS).problems == (
        "worker-1: its MultiWorkerMirroredStrategy took it for worker 0 of ['worker-0:12345', 'worker-1:12345'], "
        "not worker-1",
    )


def test_a_program_without_a_strategy_trained_alone():
    verdict = verdict_of(lines(state(0)), lines(state(1)))
    assert verdict.problems == tuple(
        f"worker-{index}: its program made no tf.distribute strategy: it trained alone, synchronized with no peer"
        for index in (0, 1)
    )


def test_workers_that_exchanged_less_than_one_all_reduce_never_synchronized():
    # The chief broadcast the initial 1 MB (sent, not received); the other received it; then heartbeats only.
    megabyte = 1024 * 1024
    chief = records(0, trainable=megabyte, net={"sent": 1000 + megabyte, "received": 1000 + 7000})
    other = records(1, trainable=megabyte, net={"sent": 1000 + 5600, "received": 1000 + megabyte})
    verdict = verdict_of(chief, other)
    assert verdict.problems == (
        "the workers exchanged less than one all-reduce of their 1.0 MB of trainable variables while training "
        "(512.0 KB each way): worker-0 sent 1.0 MB and received 6.8 KB; worker-1 sent 5.5 KB and received 1.0 MB: "
        "no gradient crossed the network, so they never synchronized",
    )
    both_ways = {"sent": 1000 + megabyte, "received": 1000 + megabyte}
    assert verdict_of(*(records(i, trainable=megabyte, net=both_ways) for i in (0, 1))).passed


def test_without_counters_the_traffic_is_not_judged_and_says_so():
    unmeasured = [lines(strategy(i, net=None), {**state(i), "net": None}) for i in (0, 1)]
    verdict = verdict_of(*unmeasured)
    assert verdict.passed, verdict.problems
    assert "traffic: not measured" in render.table(verdict)


def test_a_point_only_some_workers_recorded_fails_a_run_that_otherwise_passed():
    verdict = verdict_of(fit_log(0, epochs=3), fit_log(1, epochs=2))
    assert "no model state at epoch 3 (step 15) on worker-1, which the others recorded" in verdict.problems


def test_a_failed_worker_is_reported_for_its_failure_alone_its_partial_state_adding_no_difference():
    verdict = verdict_of(fit_log(0), lines(strategy(1)) + "Traceback...\nValueError: nan\n", exit_codes=[0, 1])
    assert [problem.split(":")[0] for problem in verdict.problems] == ["worker-1"]
    drifted_before_failing = fit_log(1, drift_from=1)
    verdict = verdict_of(fit_log(0), drifted_before_failing, exit_codes=[0, 1])
    assert [problem.split(":")[0] for problem in verdict.problems] == ["worker-1"]
    assert not any("differs" in problem for problem in verdict.problems)
    # The workers that ended well are still compared with each other.
    three = [fit_log(0, workers=3), fit_log(1, drift_from=1, workers=3), lines(strategy(2, workers=3))]
    verdict = verdict_of(*three, exit_codes=[0, 0, 1])
    assert any("model state differs at epoch 1 (step 5): worker-1 differs" in p for p in verdict.problems)


def test_each_run_of_a_restarted_cluster_is_compared_with_the_same_run_of_the_others():
    first = [lines(strategy(i, session=f"a{i}"), state(i, point="checkpoint", step=4, session=f"a{i}")) for i in (0, 1)]
    resumed = [lines(strategy(i, session=f"b{i}"), state(i, step=12, session=f"b{i}")) for i in (0, 1)]
    assert verdict_of(first[0] + resumed[0], first[1] + resumed[1]).passed
    other = lines(strategy(1, session="b1"), state(1, step=12, session="b1", variables=drifted()))
    verdict = verdict_of(first[0] + resumed[0], first[1] + other)
    assert verdict.problems[0].startswith("model state differs at the end (step 12) (run 2 of the cluster): worker-1")
    # A run that failed, restarted: its checkpoint is compared, its end (inside an aborted step, torn
    # between workers: seen under a network cut) is not.
    torn = [
        lines(
            strategy(i, session=f"a{i}"),
            state(i, point="checkpoint", step=4, session=f"a{i}"),
            state(i, step=4, session=f"a{i}", **({"variables": drifted()} if i else {})),
        )
        for i in (0, 1)
    ]
    assert verdict_of(torn[0] + resumed[0], torn[1] + resumed[1]).passed
    drifted_checkpoint = lines(
        strategy(1, session="a1"), state(1, point="checkpoint", step=4, session="a1", variables=drifted())
    )
    verdict = verdict_of(first[0] + resumed[0], drifted_checkpoint + resumed[1])
    assert verdict.problems[0].startswith("model state differs at checkpoint 1 (step 4) (run 1 of the cluster)")


def test_a_subprocess_that_made_no_strategy_is_not_the_program():
    helper = lines(state(0, session="helper", variables=drifted()))
    found = sessions(helper + records(0))
    assert len(found) == 1 and found[0].strategy is not None


def test_a_record_of_another_shape_is_ignored():
    broken = '{"event": "observed", "kind": "state", "session": "s", "variables": [["only", "two"]]}\n'
    assert sessions(broken) == []


# No PASS without evidence: what was compared must hold what was trained.


def trained_log(index: int, **state_fields) -> str:
    return lines(strategy(index), state(index, **{"trained": TRAINED, **state_fields}))


def test_a_pass_says_how_many_of_the_trained_variables_it_compared():
    verdict = verdict_of(trained_log(0), trained_log(1))
    assert verdict.passed, verdict.problems
    assert render.table(verdict).splitlines()[-3] == (
        "state: bitwise identical on 2 of 2 workers at 1 point, at the end (step 12): 3 of 3 trained variables; "
        "3 variables, 584 B; local to each worker (ON_READ), not compared: binary_accuracy/total"
    )
    assert (
        verdict.synchronization.proof == "weights identical at 1 point (3 of 3 trained variables; 3 variables, 584 B)"
    )


def test_an_end_that_compared_nothing_is_not_proven():
    for fields in ({"variables": ()}, {"variables": (), "trained": ()}, {"variables": VARIABLES[3:]}):
        verdict = verdict_of(trained_log(0, **fields), trained_log(1, **fields))
        assert not verdict.passed
        assert verdict.problems[0] == "worker-0: not proven: no variable of its model was compared at any point"


def test_a_state_of_unreadable_graph_variables_alone_is_not_proven_and_says_so():
    fields = {"variables": (), "trained": (), "unreadable": 6, "trained_unreadable": 6}
    verdict = verdict_of(trained_log(0, **fields), trained_log(1, **fields))
    assert verdict.problems[0] == (
        "worker-0: not proven: no variable of its model was compared at any point; "
        "6 variables could not be read (a TF1-style graph's own)"
    )
    some_unread = {"trained_unreadable": 2}
    verdict = verdict_of(trained_log(0, **some_unread), trained_log(1, **some_unread))
    assert verdict.problems[0] == (
        "worker-0: not proven: 2 of 5 trained variables could not be read at the end (step 12) "
        "(a TF1-style graph's own): their state is unknown"
    )


def test_a_trained_variable_the_end_does_not_compare_is_not_proven():
    trained = (*TRAINED, "binary_accuracy/total")
    verdict = verdict_of(trained_log(0, trained=trained), trained_log(1, trained=trained))
    assert list(verdict.problems) == [
        f"worker-{index}: not proven: 1 of 4 trained variables are not compared at the end (step 12) "
        "(local to each worker): binary_accuracy/total"
        for index in (0, 1)
    ]


def test_a_program_in_which_no_optimizer_updated_anything_is_not_proven():
    """Identical weights that nothing trained (a program that only built its model) prove nothing."""
    verdict = verdict_of(trained_log(0, trained=()), trained_log(1, trained=()))
    assert verdict.problems[0] == (
        "worker-0: not proven: no optimizer applied an update, so nothing shows that it trained "
        "(variables a program assigns itself are not observed)"
    )


def test_checkpoints_are_matched_by_step_so_a_chiefs_extra_checkpoint_is_no_difference():
    """The chief writes a ModelCheckpoint (the model alone) beside BackupAndRestore's at each epoch; the
    others write BackupAndRestore's alone: the chief's second write is not the others' second."""
    model_alone = VARIABLES[:2]

    def log(index: int) -> str:
        found = [strategy(index)]
        for epoch in (1, 2, 3):
            found.append(state(index, point="checkpoint", number=len(found), step=4 * epoch, trained=TRAINED))
            if index == 0:
                found.append(state(index, point="checkpoint", number=len(found), step=4 * epoch, variables=model_alone))
        return lines(*found, state(index, step=12, trained=TRAINED))

    verdict = verdict_of(log(0), log(1))
    assert verdict.passed, verdict.problems
    drifting = log(1).replace(VARIABLES[0][4], "0000000000000000", 1)  # At its first checkpoint, step 4.
    verdict = verdict_of(log(0), drifting)
    assert verdict.problems[0].startswith("model state differs at checkpoint 1 (step 4): worker-1 differs"), verdict


def test_a_variable_made_outside_the_scope_is_named_whichever_point_holds_it():
    outside = (("dense/kernel", "outside", "float32", "8x16", "1111111111111111"),)

    def log(index: int) -> str:
        epoch = state(index, point="epoch", number=1, step=5, variables=VARIABLES + outside)
        return lines(strategy(index), epoch, state(index))  # The end holds it no longer.

    verdict = verdict_of(log(0), log(1))
    assert verdict.problems[0] == (
        "worker-0: 1 trainable variable(s) made outside strategy.scope(), so trained by this worker alone: dense/kernel"
    )

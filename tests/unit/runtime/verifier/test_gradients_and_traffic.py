"""No PASS without evidence: gradients that were all-reduced, and bytes on TensorFlow's connections that
carried them, judged from hand-made records (the real programs: tests/container/test_evidence.py)."""

from tests.observations import TRAINED, connections, lines, state, strategy, update
from trainer.verifier import render
from trainer.verifier.verdict import WorkerReport, judge

STEPS = 12  # Of a model with 576 B of trainable variables: 12 * 576 / 2 = 3456 B each way at least.


def log(  # noqa: PLR0913 - one keyword per figure a test varies.
    index: int,
    *,
    reduced="optimizer",
    sent=40_000,
    received=None,
    steps_run=STEPS,
    reduced_bytes=None,
    workers=2,
    **update_fields,
) -> str:
    end = state(index, step=STEPS, trained=TRAINED)
    end["steps_run"] = steps_run
    if reduced_bytes is not None:
        end["reduced_bytes"] = reduced_bytes
    found = [strategy(index, workers=workers), update(index, reduced=reduced, **update_fields), end]
    if sent is not None:
        found.append(connections(sent, received))
    return lines(*found)


def verdict_of(*logs: str):
    reports = [WorkerReport(name=f"worker-{i}", state="exited", exit_code=0, log=text) for i, text in enumerate(logs)]
    return judge(reports, expected_workers=len(logs))


def test_gradients_the_optimizer_all_reduced_and_bytes_enough_pass_saying_both():
    verdict = verdict_of(log(0), log(1, sent=50_000, received=45_000))
    assert verdict.passed, verdict.problems
    table = render.table(verdict).splitlines()
    assert table[-3] == "gradients: all-reduced by every worker's Adam inside strategy.run, 2 replicas"
    assert table[-2] == (
        "traffic: over TensorFlow's connections every worker sent at least 39.1 KB and received at least 39.1 KB; "
        "12 steps of all-reduce of 576 B of gradients move at least 3.4 KB each way, too few to tell "
        "from TensorFlow's own coordination (up to about 16.1 KB): the bytes show the workers connected, "
        "not that gradients crossed"
    )


def test_gradients_applied_outside_strategy_run_unreduced_fail_naming_where():
    outside = {"reduced": "no", "context": "outside strategy.run", "replicas": 1}
    verdict = verdict_of(log(0, **outside), log(1, **outside))
    assert verdict.problems[0] == (
        "worker-0: its Adam applied gradients that were never all-reduced: apply_gradients ran outside "
        "strategy.run, where it reduces nothing, and no collective produced them: each worker trained on its "
        "own gradients"
    )
    skipped = {"reduced": "no", "skipped": True}
    verdict = verdict_of(log(0, **skipped), log(1))
    assert verdict.problems == (
        "worker-0: its Adam applied gradients that were never all-reduced: apply_gradients was told not to "
        "aggregate them, and no collective produced them: each worker trained on its own gradients",
    )


def test_gradients_the_program_reduced_itself_pass():
    verdict = verdict_of(log(0, reduced="program"), log(1, reduced="program"))
    assert verdict.passed, verdict.problems
    assert "gradients: all-reduced before every worker's Adam applied them (a collective precedes each)" in (
        render.table(verdict)
    )


def test_fewer_bytes_than_the_steps_need_fail_with_the_figures():
    steps = 2000  # 2000 steps of 576 B: 562.5 KB each way at least.
    verdict = verdict_of(log(0, steps_run=steps), log(1, steps_run=steps, sent=700_000, received=20_000))
    assert verdict.problems == (
        "TensorFlow's connections carried less than 2000 steps of all-reduce of 576 B of gradients must "
        "move (562.5 KB each way): worker-0 sent 39.1 KB and received 39.1 KB; worker-1 sent 683.6 KB and "
        "received 19.5 KB: the gradients did not cross the network, so the workers never synchronized",
    )
    enough = verdict_of(log(0, steps_run=steps, sent=600_000), log(1, steps_run=steps, sent=600_000))
    assert enough.passed, enough.problems
    assert "too few to tell" not in render.table(enough)


def test_a_restarted_process_is_held_to_the_steps_it_took_not_the_step_it_reached():
    resumed = verdict_of(log(0, steps_run=4, sent=3000), log(1, steps_run=4, sent=3000))
    assert resumed.passed, resumed.problems  # 4 steps need 1.1 KB; the step reached (12) would need 3.4 KB.


def test_traffic_the_launcher_could_not_count_is_said_and_claims_nothing():
    unavailable = {"event": "connections", "ports": [12345], "unavailable": "netlink refused: EPERM"}
    texts = [log(index, sent=None) + lines(unavailable) for index in (0, 1)]
    verdict = verdict_of(*texts)
    assert verdict.passed, verdict.problems
    assert render.table(verdict).splitlines()[-2] == "traffic: not measured: netlink refused: EPERM"


def test_the_bound_is_what_the_optimizers_applied_not_every_trainable_byte():
    """An embedding's sparse gradient, a frozen teacher, a target network: trainable, never all-reduced
    dense. The observer sums each optimizer's steps times its dense gradients' bytes."""
    huge = {"steps_run": 2000, "sent": 600_000}  # 2000 steps of the 576 B model would need 562.5 KB.
    assert verdict_of(log(0, **huge), log(1, **huge)).passed
    as_applied = {**huge, "sent": 100_000, "reduced_bytes": 2000 * 64}  # 64 B of dense gradients a step.
    verdict = verdict_of(log(0, **as_applied), log(1, **as_applied))
    assert verdict.passed, verdict.problems
    assert "2000 steps of all-reduce of 64 B of gradients move at least 62.5 KB each way" in render.table(verdict)
    short = {**as_applied, "sent": 50_000}
    assert "less than 2000 steps of all-reduce of 64 B of gradients" in verdict_of(log(0, **short), log(1)).problems[0]


def test_gradients_applied_eagerly_outside_strategy_run_are_not_proven_whatever_the_traffic():
    """Any other collective (a metric updated outside strategy.run) would meet the traffic's floor."""
    eager = {"reduced": "unknown", "context": "outside strategy.run", "replicas": 1, "sent": 10_000_000}
    verdict = verdict_of(log(0, **eager), log(1, **eager))
    assert list(verdict.problems) == [
        f"worker-{index}: not proven: its Adam applied gradients eagerly outside strategy.run, where how they "
        "were reduced cannot be read (run the step in strategy.run, or as a tf.function)"
        for index in (0, 1)
    ]
    one = log(0, workers=1, **eager)
    alone = judge([WorkerReport(name="worker-0", state="exited", exit_code=0, log=one)], expected_workers=1)
    assert alone.passed, alone.problems  # One worker has nothing to reduce its gradients with.

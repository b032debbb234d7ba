"""The verifier's account of the keeper's restarts (trainer/verifier/recovery.py)."""

from tests.observations import records
from trainer.contract.resultsdir import WorkerRecord
from trainer.verifier import render
from trainer.verifier.recovery import from_keeper, starting_steps
from trainer.verifier.verdict import WorkerReport, judge

FINAL = '{"event": "final", "worker": 0, "workers": 2, "replicas": 2, "final_loss": 0.41}'
# Two runs of the chief's trainer, as it prints them (trainer/training/resume.py): each start is a
# line for people and a JSON event for the verifier.
CHIEF_LOG = "\n".join(
    [
        "checkpoint | none in /checkpoints: starting at step 0",
        '{"event": "start", "step": 0}',
        "checkpoint | step 4 saved to /checkpoints/step-00000004 in 0.02s",
        "checkpoint | resuming from step 4 (/checkpoints/step-00000004)",
        '{"event": "start", "step": 4}',
        FINAL,
    ]
)


def keeper(exit_code=0, restarts=({"failed": {"worker-1": 137}, "reason": "worker-1 exited 137 (killed by SIGKILL)"},)):
    details = {"restarts": list(restarts), "limit": 3}
    return WorkerRecord("keeper", "exited", exit_code, "keeper | gave up: worker-1 exited 1\n", details)


def workers():
    return [
        WorkerReport(
            name=f"worker-{index}",
            state="exited",
            exit_code=0,
            log=(CHIEF_LOG if index == 0 else FINAL) + "\n" + records(index),
        )
        for index in range(2)
    ]


def test_each_start_of_the_trainer_is_found_in_order():
    assert starting_steps(CHIEF_LOG) == [0, 4]


def test_the_starts_come_from_the_json_events_never_from_the_prose():
    prose = "\n".join(line for line in CHIEF_LOG.splitlines() if not line.startswith("{"))
    assert "resuming from step 4" in prose
    assert starting_steps(prose) == []
    events_only = '{"event": "start", "step": 0}\nlauncher | worker-0: lost\n  {"event": "start", "step": 250}  \n'
    assert starting_steps(events_only) == [0, 250]


def test_start_events_without_a_whole_step_are_skipped():
    log = "\n".join(
        [
            '{"event": "start", "step": 8}',
            '{"event": "start"}',
            '{"event": "start", "step": "12"}',
            '{"event": "start", "step": true}',
            '{"event": "start", "step": 16',  # Cut off mid-line.
            '{"event": "final", "step": 20}',
        ]
    )
    assert starting_steps(log) == [8]


def test_a_restart_is_reported_with_the_step_it_resumed_from():
    recovery = from_keeper(keeper(), CHIEF_LOG)
    verdict = judge(workers(), expected_workers=2, recovery=recovery)
    assert verdict.passed
    table = render.table(verdict)
    assert "restarts: 1 of at most 3: 1: worker-1 exited 137 (killed by SIGKILL), resumed from step 4" in table
    assert "verdict: PASS: 2 of 2 workers agree (after 1 restart): replicas=2" in table
    assert '"restarts": [{"reason": "worker-1 exited 137 (killed by SIGKILL)", "resumed_from_step": 4}]' in (
        render.as_json(verdict)
    )


def test_a_keeper_that_gave_up_fails_the_verdict_with_its_reason():
    recovery = from_keeper(keeper(exit_code=8), CHIEF_LOG)
    verdict = judge(workers(), expected_workers=2, recovery=recovery)
    assert not verdict.passed
    assert verdict.problems[0] == "keeper: exited 8: keeper | gave up: worker-1 exited 1"


def test_a_keeper_that_gave_up_is_reported_with_its_statuss_reason_over_its_log():
    record = WorkerRecord(
        "keeper",
        "exited",
        8,
        "keeper | restart 1 of at most 1: worker-1 exited 1\nkeeper | stopping every worker after an error\n",
        {"restarts": [], "limit": 1, "reason": "gave up: worker-1 exited 1, after 1 restart(s)"},
    )
    verdict = judge(workers(), expected_workers=2, recovery=from_keeper(record, CHIEF_LOG))
    assert verdict.problems == ("keeper: exited 8: gave up: worker-1 exited 1, after 1 restart(s)",)


def test_a_keeper_that_never_reported_fails_the_verdict():
    missing = WorkerRecord("keeper", "missing", None, "")
    verdict = judge(workers(), expected_workers=2, recovery=from_keeper(missing, CHIEF_LOG))
    assert verdict.problems == ("keeper: the keeper never started (see its container's log)",)


def test_no_restarts_say_so():
    recovery = from_keeper(keeper(restarts=()), "checkpoint | none in /checkpoints: starting at step 0")
    assert recovery.describe() == "restarts: none (limit 3)"
    assert render.summary(judge(workers(), expected_workers=2, recovery=recovery)).startswith(
        "verdict: PASS: 2 of 2 workers agree: "
    )

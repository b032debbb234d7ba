"""A step begun in the background (steps.Begin) and waited for further on (steps.Finish): a cold
run's `down` of the last run's containers, while the set-up runs."""

import threading
import time
from dataclasses import dataclass

import pytest
from tfcluster.cluster import steps
from tfcluster.cluster.plan import Plan

from trainer.contract.exitcodes import ExitCode

WAIT = 10.0  # Far beyond what any step here takes: reached only if the steps do not overlap.


@dataclass(frozen=True, eq=False)  # Known by itself, as the run's own steps are by their value.
class Waits:
    """A step that waits for `event` (set by a later step), and notes what it saw."""

    event: threading.Event
    seen: list

    def run(self, execution):
        self.seen.append(("set" if self.event.wait(WAIT) else "never set", execution.environment.get("IMAGE")))


@dataclass(frozen=True, eq=False)
class Sets:
    event: threading.Event

    def run(self, execution):
        execution.environment["IMAGE"] = "pinned later"  # As the set-up pins the image it found.
        self.event.set()


def execution() -> steps.Execution:
    return steps.Execution(plan=None, environment={"IMAGE": "by name"})


def test_a_step_begun_in_the_background_runs_alongside_the_steps_after_it():
    event, seen = threading.Event(), []
    begun = Waits(event, seen)
    run = execution()
    assert steps.Begin(begun).run(run) is None
    Sets(event).run(run)  # Were `begun` not running alongside, it would have waited WAIT for this first.
    assert steps.Finish(begun).run(run) is None
    # It saw the later step's event, and the environment as it was when it began.
    assert seen == [("set", "by name")]
    assert run.begun == {}


def test_finish_gives_what_the_step_returned_or_raises_what_it_raised():
    @dataclass(frozen=True)
    class Ends:
        def run(self, _execution):
            return ExitCode.CONFIG_ERROR

    @dataclass(frozen=True)
    class Fails:
        def run(self, _execution):
            raise OSError("no docker")

    run = execution()
    steps.Begin(Ends()).run(run)
    steps.Begin(Fails()).run(run)
    assert steps.Finish(Ends()).run(run) == ExitCode.CONFIG_ERROR
    with pytest.raises(OSError, match="no docker"):
        steps.Finish(Fails()).run(run)


def test_however_a_run_ends_its_background_steps_are_waited_for():
    release, seen = threading.Event(), []
    begun = Waits(release, seen)
    run = execution()
    steps.Begin(begun).run(run)
    threading.Timer(0.05, release.set).start()  # Ends it soon: the wait below must outlast it.
    run.finish_all()
    assert seen == [("set", "by name")]


def test_a_cold_run_begins_the_last_runs_down_before_the_set_up_and_waits_for_it_before_up():
    planned = steps.of(Plan(2, False, None, None))
    kinds = [type(step).__name__ for step in planned]
    begin, finish = kinds.index("Begin"), kinds.index("Finish")
    assert planned[begin].step == planned[finish].step == steps.Compose(steps.DOWN, unless=steps.NOTHING_LEFT)
    assert begin < kinds.index("SetUp") < finish < kinds.index("CheckName") < kinds.index("Up")
    assert kinds.count("Compose") == 1  # `stop` alone: `down` only in the background.


def test_a_warm_run_takes_nothing_down():
    kinds = [type(step).__name__ for step in steps.of(Plan(2, False, None, None, warm=True))]
    assert "Begin" not in kinds and "Finish" not in kinds


class Baking(Plan):
    """A plan whose project is baked into an image (--bake): only what steps.of asks of it."""

    @property
    def bakes(self) -> bool:
        return True

    def written(self) -> dict:
        return {}


def test_a_baked_run_takes_the_last_run_down_after_its_bake_whose_image_compose_needs():
    kinds = [type(step).__name__ for step in steps.of(Baking(2, False, None, None))]
    assert "Begin" not in kinds and "Finish" not in kinds
    assert kinds.index("Bake") < kinds.index("CheckName") < kinds.index("Compose") < kinds.index("Up")


def test_a_cancelled_run_waits_for_its_background_steps_only_so_long():
    never, seen = threading.Event(), []
    run = execution()
    steps.Begin(Waits(never, seen)).run(run)
    started = time.monotonic()
    run.finish_all(0.2)
    assert time.monotonic() - started < WAIT / 2  # Not the step's whole wait...
    assert seen == []  # ...which goes on alone.
    never.set()

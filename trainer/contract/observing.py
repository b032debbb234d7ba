"""How the launcher turns the observer on (trainer/observer/): the variable that names its record file.

The observer runs inside the training program and cannot import this package (a user's own
`trainer` would shadow it), so it spells the name itself;
tests/unit/runtime/observer/test_observer.py holds the two the same.
"""

VARIABLE = "TFCLUSTER_OBSERVER"
# The file the observer keeps the training's progress in (trainer/observer/progress.py), in the
# results directory, where a shaper times its faults by it (trainer/shaper/schedule.py).
PROGRESS = "TFCLUSTER_PROGRESS"

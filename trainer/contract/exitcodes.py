"""Exit codes shared by every role, one per cause (docs/exit-codes.md says who returns which)."""

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    # 1 is left to Python itself: an unexpected exception, which is a bug to report.
    CONFIG_ERROR = 2
    TRAINING_CHECK_FAILED = 3
    PEER_NEVER_JOINED = 4
    PEER_LOST = 5
    DEADLINE_EXCEEDED = 6
    VERIFICATION_FAILED = 7
    # The keeper (trainer/keeper/keeper.py) stopped restarting the cluster.
    GAVE_UP = 8
    # The container's memory limit ended the training program (trainer/launcher/health.py).
    OUT_OF_MEMORY = 9
    # No worker's program made progress for TF_STALL_TIMEOUT: each dumped its stack and was stopped.
    STALLED = 10
    # 11 is scripts/nodes' (a step that failed on the machine).
    # A volume filled up: the results volume (the logs, TF_RESULTS_SIZE) or the checkpoints one
    # (TF_CHECKPOINTS_SIZE); the line names which.
    VOLUME_FULL = 12
    # 128 + SIGTERM, as a shell reports a process ended by SIGTERM.
    TERMINATED = 143

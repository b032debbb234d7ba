"""Why the launcher ends a run itself: one exception class per reason, each with its exit code.

A phase raises one of these; the supervisor prints its message as the launcher's last line, records
it as the status's reason for the verifier, and exits with its code (trainer.contract.exitcodes).
When the training program ended on its own and the launcher has nothing to add, nothing is raised:
the program's exit code and its own last lines say why.
"""

import signal

from trainer.contract.exitcodes import ExitCode


class LaunchFailure(Exception):
    """A run the launcher ended: `message` is the one line that says why, `exit_code` what it exits with.

    Only its subclasses are raised: each names one reason, and sets the exit code that goes with it.
    """

    exit_code: ExitCode

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ShapingMissed(LaunchFailure):
    """The worker's network shaper reported nothing in time, or measured a network other than the profile."""

    exit_code = ExitCode.CONFIG_ERROR


class TopologyMismatch(LaunchFailure):
    """A peer was given another cluster list, index or training settings than this worker."""

    exit_code = ExitCode.CONFIG_ERROR


class PeerNeverJoined(LaunchFailure):
    """A peer did not meet this worker within the join deadline, or gave up before training."""

    exit_code = ExitCode.PEER_NEVER_JOINED


class PeerLost(LaunchFailure):
    """A peer stopped answering or failed while training ran."""

    exit_code = ExitCode.PEER_LOST


class DeadlineExceeded(LaunchFailure):
    """The training program was still running at the run deadline."""

    exit_code = ExitCode.DEADLINE_EXCEEDED


class OutOfMemory(LaunchFailure):
    """The container's memory limit ended the program: the kernel killed it, or it thrashed (and lost its peers)."""

    exit_code = ExitCode.OUT_OF_MEMORY


class Stall(LaunchFailure):
    """No worker's program made progress for the stall timeout: each dumped its stack and was stopped."""

    exit_code = ExitCode.STALLED


class Stopped(LaunchFailure):
    """A signal (SIGTERM from `docker stop`, or SIGINT) stopped the run, whatever else happened."""

    exit_code = ExitCode.TERMINATED

    def __init__(self, signal_number: int):
        super().__init__(f"stopped by {signal.Signals(signal_number).name}")
        self.signal_number = signal_number


def listing(lost: dict[str, str]) -> str:
    """Lost peers as the lines above name them: each address, with why it counts as lost."""
    return ", ".join(f"{peer} ({reason})" for peer, reason in lost.items())

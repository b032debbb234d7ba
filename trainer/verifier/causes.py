"""Which failure started it: the order of the verdict's problems, and an error several workers raised, said once.

When one worker fails, its peers fail after it: TensorFlow aborts their collectives, and their
launchers exit 5 naming the lost peer. Their lines are consequences, and people read the first
line: so the failure that started it comes first. Each failed worker has a `Cause`, read from its
exit code (trainer/contract/exitcodes.py) and its `failed` event before any log line; from a log,
only what its program raised (trainer/verifier/reasons.py, `own_error` and `caused_by_peer`), as
its log's record holds them (trainer/verifier/worker_log.py).

When several workers raised the same error (the same exception line, or the same known failure,
once `same_error` has masked what differs between workers' copies of it), it is said once, naming
them, where the first of them would be.
"""

import enum
import re
from collections.abc import Iterable
from typing import Protocol

from trainer.contract.exitcodes import ExitCode
from trainer.verifier.reasons import is_exception, lost_peers
from trainer.verifier.worker_log import WorkerLog


class Cause(enum.IntEnum):
    """Why a worker failed, in the order the verdict names its problems: the failure that started it first."""

    OWN = 0  # Its own: its program's error, its own end (killed, out of memory, missing), its own state.
    # Its program raised an error of its own, and its launcher found a peer lost too: the peer may
    # have failed the same way, and earlier, so that peer's own line comes before this one.
    OWN_AND_PEER = 1
    PEER = 2  # Only a peer's: it lost one (exit 5), or one never joined (exit 4), and raised nothing of its own.


# The launcher's exit codes for a worker that ended because of a peer.
PEER_CODES = frozenset({ExitCode.PEER_LOST, ExitCode.PEER_NEVER_JOINED})
# The harness's own exit codes. Any other (1, an uncaught exception) is the program's, which says
# nothing of peers: only then is what the program raised asked whether a lost peer made it.
_HARNESS_CODES = frozenset(code.value for code in ExitCode)


def of_exit(exit_code: int, log: WorkerLog, *, raised_own: bool) -> Cause:
    """The cause of a failed exit. `raised_own`: the problem says the program's own error (`own_error`)."""
    if raised_own:
        return Cause.OWN_AND_PEER if exit_code == ExitCode.PEER_LOST else Cause.OWN
    if exit_code in PEER_CODES or (exit_code not in _HARNESS_CODES and log.caused_by_peer):
        return Cause.PEER
    return Cause.OWN


def of_saved_log(log: WorkerLog) -> Cause:
    """For a saved log with no exit code: a peer's doing when its last `failed` event says so, and it raised nothing."""
    failed = [event.get("exit_code") for event in log.failed]
    return Cause.PEER if failed and failed[-1] in PEER_CODES and log.own_error is None else Cause.OWN


def also_lost(reason: str | None) -> str:
    """The clause after a lost peer's worker's own error: the peers its launcher's line (`reason`) names."""
    if reason is None:
        return "; it also lost a peer"  # A saved log without the launcher's line: its exit code says that much.
    listing = lost_peers(reason)
    return f"; it also lost peer(s) {listing}" if listing else f"; it also lost a peer: {reason}"


class Failed(Protocol):
    """A worker as the verdict judged it (trainer/verifier/verdict.py, WorkerOutcome)."""

    name: str
    problem: str | None
    cause: Cause
    error: str | None  # The error its problem says its program raised, if it says one.


def in_order(workers: Iterable[Failed], *, cluster: int) -> tuple[str, ...]:
    """Each failed worker's problem line, by `Cause` (in the workers' order within each); an error
    several of them raised, once. `cluster`: how many workers the cluster has, for `every worker`."""
    workers = list(workers)
    names = [worker.name for worker in workers]
    failed = sorted((worker for worker in workers if worker.problem), key=lambda worker: worker.cause)
    raisers: dict[str, list[Failed]] = {}  # Each in the workers' order, the names as the cluster lists them.
    for worker in workers:
        if worker.problem and worker.error:
            raisers.setdefault(same_error(worker.error, names), []).append(worker)
    lines, said = [], set()
    for worker in failed:
        key = same_error(worker.error, names) if worker.error else None
        group = raisers[key] if key else []
        if len(group) < 2:
            lines.append(f"{worker.name}: {worker.problem}")
        elif key not in said:
            said.add(key)
            lines.append(_raised_by_several(group, cluster=cluster))
    return tuple(lines)


def _raised_by_several(group: list[Failed], *, cluster: int) -> str:
    who = "every worker" if len(group) >= cluster else f"{len(group)} of {cluster} workers"
    error = group[0].error
    # A known failure's advice (trainer/verifier/diagnoses.py) is no exception line: it was not raised as such.
    did = "raised the same error" if is_exception(error) else "failed the same way"
    return f"{who} ({', '.join(worker.name for worker in group)}) {did}: {error}"


# What differs between workers' copies of one error: an address with its port (`worker-1:12345`), a
# TensorFlow task number (`/task:1`), an object's address in memory (`0x7f3a...`), and their names.
_ADDRESS = re.compile(r"\b[\w.-]+:\d{1,5}\b")
_TASK = re.compile(r"\btask[: ]\d+\b")
_OBJECT = re.compile(r"\b0x[0-9a-fA-F]+\b")


def same_error(error: str, names: list[str]) -> str:
    """`error` with what differs between workers' copies of it masked: equal for the same error on each.

    Nothing else is masked: two messages that differ in any other word or figure (a shape, a value,
    a file) are two errors, each shown on its own worker's line.
    """
    for name in sorted(names, key=len, reverse=True):  # worker-10 before worker-1.
        error = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", "<worker>", error)
    error = _ADDRESS.sub("<address>", error)
    error = _TASK.sub("task <n>", error)
    return _OBJECT.sub("0x<address>", error)

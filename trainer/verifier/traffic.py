"""Whether the gradients crossed the network: the bytes of TensorFlow's own connections against what the steps need.

Each worker's launcher counts the bytes of every TCP connection to or from a worker's TensorFlow
port while its program runs (trainer/launcher/traffic.py), leaving out the launchers' own
rendezvous and heartbeats, and prints them as one record, `{"event": "connections", "sent": ...,
"received": ...}`: the last one in its log is its count (trainer/verifier/worker_log.py). An
all-reduce of B bytes across N workers makes each worker send and receive at least (N-1)/N of B (a
ring moves twice that), so S synchronized steps of a model with B bytes of trainable variables
must move at least S * B * (N-1)/N each way; a worker that moved less did not all-reduce its
gradients over the network. The bound holds for any all-reduce; it is a floor, not an estimate.

TensorFlow's connections also carry its own coordination: measured here, 6 to 10 KB for a run that
made the strategy and a small model and then sat idle for 1 s or for 30 s. When the steps need less
than that, meeting the bound shows that the workers were connected, not that gradients crossed,
and the line says so; what proves the gradients were reduced is then how they were applied
(trainer/verifier/evidence.py). Logs written before the launcher counted connections carry the
observer's interface counters instead (`net`), judged as they were: one all-reduce of the model
for the whole run.
"""

import dataclasses

from trainer.verifier.observed import Session
from trainer.verifier.text import size

NOISE = 16 * 1024  # About twice the coordination traffic measured in a run of 30 s: below it, bytes prove little.
NOISE_PER_SECOND = 128


@dataclasses.dataclass(frozen=True, kw_only=True)
class Traffic:
    problems: tuple[str, ...] = ()
    line: str | None = None  # For a passing run's proof.


def judge_traffic(observed: dict[str, list[Session]], counted: dict[str, dict], expected_workers: int) -> Traffic:
    if expected_workers < 2 or not observed:
        return Traffic()
    if all(isinstance((counted.get(name) or {}).get("sent"), int) for name in observed):
        return _judge_connections(observed, counted, expected_workers)
    unavailable = next((record["unavailable"] for record in counted.values() if record.get("unavailable")), None)
    if unavailable:
        return Traffic(line=f"traffic: not measured: {unavailable}")
    return _judge_interfaces(observed, expected_workers)


def _needs(session: Session, expected_workers: int) -> tuple[int, float, float]:
    """The steps this worker took, what one of them all-reduces, and the bytes each way they move at least.

    What a step all-reduces is its optimizers' dense gradients, as the observer saw them applied
    (an embedding's sparse gradient is gathered, of a size known only as it runs: left out); records
    older than that give the trainable variables' bytes."""
    last = session.states[-1]
    steps = last.steps_run if last.steps_run is not None else int(last.step or 0)
    reduced = last.reduced_bytes if last.reduced_bytes is not None else steps * last.trainable_bytes
    per_step = reduced / steps if steps else 0.0
    return steps, per_step, reduced * (expected_workers - 1) / expected_workers


def _judge_connections(observed, counted, expected_workers) -> Traffic:
    needs = {name: _needs(sessions[-1], expected_workers) for name, sessions in observed.items()}
    short = {
        name: record
        for name, record in ((name, counted[name]) for name in observed)
        if min(record["sent"], record["received"]) < needs[name][2]
    }
    steps, per_step, need = max(needs.values(), key=lambda found: found[2])
    what = f"{steps} steps of all-reduce of {size(per_step)} of gradients"
    if short:
        shown = "; ".join(
            f"{name} sent {size(record['sent'])} and received {size(record['received'])}"
            for name, record in short.items()
        )
        return Traffic(
            problems=(
                f"TensorFlow's connections carried less than {what} must move ({size(need)} each way): {shown}: "
                "the gradients did not cross the network, so the workers never synchronized",
            )
        )
    sent = min(counted[name]["sent"] for name in observed)
    received = min(counted[name]["received"] for name in observed)
    line = (
        f"traffic: over TensorFlow's connections every worker sent at least {size(sent)} and received at least "
        f"{size(received)}; {what} move at least {size(need)} each way"
    )
    noise = NOISE + NOISE_PER_SECOND * max(_seconds(sessions[-1]) for sessions in observed.values())
    if need < noise:
        line += (
            f", too few to tell from TensorFlow's own coordination (up to about {size(noise)}): "
            "the bytes show the workers connected, not that gradients crossed"
        )
    return Traffic(line=line)


def _seconds(session: Session) -> float:
    start = (session.strategy or {}).get("time")
    end = session.states[-1].time
    return max(0.0, end - float(start)) if isinstance(start, (int, float)) and end else 0.0


def _judge_interfaces(observed, expected_workers) -> Traffic:
    """Older logs: each worker moved at least one all-reduce of its model, on its interfaces' counters."""
    exchanged = _exchanged(observed)
    trainable = max((s[-1].states[-1].trainable_bytes for s in observed.values()), default=0)
    bound = trainable * (expected_workers - 1) / expected_workers
    if len(exchanged) < len(observed):
        return Traffic(
            line="traffic: not measured (a worker's network counters could not be read, or it ran on loopback)"
        )
    short = {name: figures for name, figures in exchanged.items() if min(figures) < bound}
    if short and bound:
        shown = "; ".join(
            f"{name} sent {size(figures[0])} and received {size(figures[1])}" for name, figures in short.items()
        )
        return Traffic(
            problems=(
                f"the workers exchanged less than one all-reduce of their {size(trainable)} of trainable variables "
                f"while training ({size(bound)} each way): {shown}: no gradient crossed the network, so they never "
                "synchronized",
            )
        )
    sent = min(figures[0] for figures in exchanged.values())
    received = min(figures[1] for figures in exchanged.values())
    return Traffic(
        line=f"traffic: while training, every worker sent at least {size(sent)} to its peers and received "
        f"at least {size(received)}"
    )


def _exchanged(observed: dict[str, list[Session]]) -> dict[str, tuple[int, int]]:
    """Each worker's bytes sent and received from its strategy's start to its last state, where both were read."""
    found = {}
    for name, sessions in observed.items():
        session = sessions[-1]
        start = (session.strategy or {}).get("net")
        end = session.states[-1].net if session.states else None
        if isinstance(start, dict) and isinstance(end, dict):
            found[name] = (end["sent"] - start["sent"], end["received"] - start["received"])
    return found

"""The shaper of one worker: `python -m trainer.shaper [partition [in | out] | heal]` in the worker's namespace.

Run as a service of compose.network.yaml (`network_mode: service:worker-N`, NET_ADMIN), it
applies the profile (trainer/contract/shaping.py) to the worker's links, starts the delaying relay where
the profile adds latency, measures every link to the other workers' shapers, writes what it found
to the results directory (`network-<worker>.json`, which the worker's launcher waits for before
training and the verifier reports), and then stays until the worker's launcher has ended, cutting
its worker off and healing it as the faults of `TF_NETWORK_FAULTS` for it come due
(trainer/shaper/schedule.py).

When its worker ends it removes its rules: a warm worker's namespace outlives the run, and the
next run's shaper shapes it again (it also clears what an earlier one left, should one have been
stopped first).

`partition` cuts the worker off (every packet in or out of its interface dropped; `partition in`
or `partition out`: one way only, what arrives at it or what leaves it); `heal` undoes it.
scripts/partition runs them in a worker's shaper.

Exit codes: 0 done, 2 bad configuration or rules the kernel refused, 143 stopped by a signal.
"""

import asyncio
import fcntl
import functools
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from trainer.contract import shaping
from trainer.contract.console import config_error
from trainer.contract.faults import Fault, record_path
from trainer.contract.faults import parse as parse_faults
from trainer.contract.resultsdir import WorkerFiles, live_status
from trainer.contract.shaping import Profile
from trainer.shaper import probe, relay, rules, schedule
from trainer.shaper.checks import Check, checks
from trainer.shaper.peers import RELAY_OFFSET, Peers
from trainer.shaper.settings import ShaperSettings
from trainer.shaper.topology import PeerLink, links_of, uniform

MEASURE_TIMEOUT = 60.0


def say(line: str) -> None:
    print(f"shaper | {line}", flush=True)


def cluster_of(files: WorkerFiles, timeout: float) -> tuple[int, list[str], str | None]:
    """(TensorFlow's port here, the other workers' hosts, the launcher's run), from its own status.

    The launcher publishes the cluster it was given there (trainer/contract/resultsdir.py), so the template is
    written once, in compose.yaml, and the shaper cannot disagree with its worker.
    """
    me = files.name
    deadline = time.monotonic() + timeout
    while True:
        # A live launcher's only: after a restart by the keeper, the killed run's status is still there.
        published = live_status(files) or {}
        workers = published.get("workers")
        if workers:
            break
        if time.monotonic() >= deadline:
            raise ValueError(
                f"no running launcher of {me} published its cluster in {files.status} within {timeout:.0f}s"
            )
        time.sleep(0.1)  # The launcher starts at the same moment; nothing to wait on but its file.
    hosts = [address.rsplit(":", 1)[0] for address in workers]
    if me not in hosts:
        raise ValueError(f"`SHAPED_WORKER` ({me!r}) is not in its launcher's cluster {workers}")
    port = int(workers[hosts.index(me)].rsplit(":", 1)[1])
    return port, [host for host in hosts if host != me], published.get("run")


def write_report(results_dir: str, worker: str, report: dict) -> None:
    """Where the launcher and the verifier read it (trainer/contract/shaping.py), whole, by a rename."""
    path = shaping.report_path(results_dir, worker)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(report), encoding="utf-8")
    os.replace(temporary, path)


def wait_for_worker_end(files: WorkerFiles) -> None:
    """Until the worker's launcher lets go of its lock (it holds it for its whole life)."""
    with open(files.lock) as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)


async def apply(me: str, profile: Profile, tf_port: int, links: list[PeerLink], faults: list[Fault]) -> Peers | None:
    """The profile's rules, and its delaying relays in front of TensorFlow's port and the probe's;
    with links that differ, or faults that change links, each peer's (trainer/shaper/peers.py)."""
    if not uniform(links, profile) or any(fault.kind == "link" for fault in faults):
        peers = Peers(me, links, faults)
        await peers.start(tf_port)
        return peers
    if profile.rate_mbit:
        rules.limit_rate(profile.rate_mbit)
    if profile.loss:
        rules.drop_randomly(profile.loss)
    if profile.delays:
        delay = relay.Delay(profile.rtt_ms / 2, profile.jitter_ms)
        for port in (tf_port, probe.PROBE_PORT):
            await relay.serve(port + RELAY_OFFSET, port, delay)
            rules.redirect(port, port + RELAY_OFFSET)
    return None


async def apply_afresh(me: str, profile: Profile, tf_port: int, links: list[PeerLink], faults: list[Fault]):
    """`apply`, on a namespace cleared first. A warm worker's keeps what an earlier run's shaper
    left (one stopped before it could clear them): its redirects would point at a relay that is gone."""
    left = rules.clear()
    if left:
        say(f"{me}: removed {left} rule(s) an earlier run left")
    return await apply(me, profile, tf_port, links, faults)


def injector(peers: Peers | None):
    """How a fault is injected and undone: a cut by its rules, a link's by its peers' profiles."""

    def inject(fault: Fault) -> None:
        rules.partition(fault.way) if fault.kind == "cut" else peers.change(fault)

    def undo(fault: Fault) -> None:
        rules.heal() if fault.kind == "cut" else peers.restore(fault)

    return inject, undo


def measure_all(links: list[PeerLink]) -> list[probe.Link]:
    deadline = time.monotonic() + MEASURE_TIMEOUT
    measured = []
    for link in links:
        rate, loss = link.expected.rate_mbit, link.expected.loss
        sink = int(rate * 1e6 / 8 * 1.5) if rate else 0  # About 1.5 s at the rate.
        measured.append(probe.measure(link.peer, deadline=deadline, sink_bytes=sink, loss=bool(loss)))
    return measured


def report_of(
    me: str, profile: Profile, links: list[probe.Link], found: list[Check], run_id: str | None, by_link: dict
) -> dict:
    """What `write_report` writes, and what the launcher and the verifier read; `by_link`: each
    peer's expected profile, where links differ (each link then names it)."""
    return {
        "worker": me,
        "profile": profile.name,
        "describe": profile.describe(),
        "links": [
            {"peer": link.peer, "rtt_ms": link.rtt_ms, "throughput_mbit": link.throughput_mbit, "loss": link.loss}
            | ({"profile": by_link[link.peer].name, "describe": by_link[link.peer].describe()} if by_link else {})
            for link in links
        ],
        "checks": [{"check": check.describe(), "ok": check.ok} for check in found],
        "ok": all(check.ok for check in found),
        # Whose run this is for: a launcher started again must not take an earlier run's figures.
        "run": run_id,
    }


def say_measured(me: str, links: list[probe.Link], found: list[Check]) -> None:
    for link in links:
        figures = [f"rtt {link.rtt_ms:.2f} ms"]
        if link.throughput_mbit is not None:
            figures.append(f"throughput {link.throughput_mbit:.1f} Mbit/s")
        if link.loss is not None:
            figures.append(f"loss {link.loss:.2%}")
        say(f"{me} -> {link.peer}: " + ", ".join(figures))
    for check in found:
        say(check.describe())


def links_told(settings: ShaperSettings, me: str, others: list[str]) -> tuple[list[PeerLink], dict[str, Profile]]:
    """Every link of this worker, and where links differ each one's expected profile, said."""
    links = links_of(settings, me, others)
    by_link = {} if uniform(links, settings.profile) else {link.peer: link.expected for link in links}
    for peer, expected in by_link.items():
        say(f"{me} <-> {peer}: {expected.describe()}")
    return links, by_link


async def shape(settings: ShaperSettings) -> int:
    me, profile = settings.worker, settings.profile
    files = WorkerFiles(Path(settings.results_dir), me)
    try:
        if not me:
            raise ValueError("`SHAPED_WORKER` must name the worker whose network this is")
        tf_port, others, run_id = cluster_of(files, MEASURE_TIMEOUT)
        # Again, now that the cluster is known: a worker the faults name must be in it.
        workers = [me, *others]
        mine = [fault for fault in parse_faults(settings.faults_text, workers) if me in fault.ends(workers)]
    except ValueError as error:
        return config_error("shaper", str(error))
    say(f"{me}: profile {profile.describe()}")
    links, by_link = links_told(settings, me, others)
    try:
        peers = await apply_afresh(me, profile, tf_port, links, mine)
    except (rules.RuleError, OSError) as error:
        return config_error("shaper", str(error))
    # Only now, with every rule and relay in place: a peer must never measure this worker's links
    # unshaped. Before this, its probe is refused, or closed by the relay, and tries again.
    server = probe.Server(probe.PROBE_PORT)
    loop = asyncio.get_running_loop()
    try:
        measured = await loop.run_in_executor(None, measure_all, links)
    except OSError as error:
        return config_error("shaper", f"could not measure the links to {', '.join(others)}: {error}")
    expected = {link.peer: link.expected for link in links}
    found = [check for link in measured for check in checks(expected[link.peer], link)]
    say_measured(me, measured, found)
    report = report_of(me, profile, measured, found, run_id, by_link)
    # Every fault recorded before the report that the launcher waits for to train (schedule.py says why).
    schedule.plan(mine, record := Path(record_path(settings.results_dir, me)))
    write_report(settings.results_dir, me, report)
    say(f"{me}: shaping {'in place' if report['ok'] else 'NOT as the profile asks'}; staying until the worker ends")
    ended = threading.Event()
    inject, undo = injector(peers)
    faults = loop.run_in_executor(
        None,
        functools.partial(
            schedule.run,
            mine,
            worker=me,
            progress=files.progress,
            record=record,
            inject=inject,
            undo=undo,
            ended=ended,
            say=say,
        ),
    )
    await loop.run_in_executor(None, wait_for_worker_end, files)
    ended.set()
    server.close()
    try:
        await faults
        # The namespace may outlive this run (a warm worker's): leave it as it was found.
        rules.clear()
    except rules.RuleError as error:
        return config_error("shaper", str(error))
    return 0


WAYS = {"both": "", "in": " (what arrives at it)", "out": " (what leaves it)"}


def cut(command: str, worker: str, way: str = "both") -> int:
    """`partition` (`way`: a key of WAYS) or `heal`, for `worker` (named only in what it says)."""
    try:
        changed = rules.partition(way) if command == "partition" else rules.heal()
    except rules.RuleError as error:
        return config_error("shaper", str(error))
    if command == "partition":
        say(f"{worker}: cut off{WAYS[way]}" if changed else f"{worker}: already cut off")
    else:
        say(f"{worker}: healed" if changed else f"{worker}: was not cut off")
    return 0


def main(argv: list[str]) -> int:
    # At once: the rules go with the worker's namespace, and a thread blocked on the worker's lock
    # would otherwise hold up the exit until Docker's SIGKILL.
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(143))
    if argv in (["heal"], ["partition"], *(["partition", way] for way in WAYS)):
        # Only the worker's name: cutting a worker off needs no profile.
        worker = ShaperSettings.from_env(os.environ, only=("worker",)).worker
        return cut(argv[0], worker or "this worker", *argv[1:])
    if argv:
        usage = "python -m trainer.shaper [partition [both | in | out] | heal]"
        return config_error("shaper", f"unknown command {' '.join(argv)!r} (usage: {usage})")
    try:
        settings = ShaperSettings.from_env(os.environ)
    except ValueError as error:
        return config_error("shaper", str(error))
    return asyncio.run(shape(settings))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

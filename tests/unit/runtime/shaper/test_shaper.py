"""The shaper's parts that need no privilege: profiles, the delaying relay, the probes, the checks."""

import asyncio
import json
import random
import signal
import socket
import subprocess
import threading
import time

import pytest

from tests.conftest import free_port
from trainer.contract import shaping
from trainer.contract.resultsdir import Recorder, WorkerFiles
from trainer.contract.shaping import PROFILES, Profile
from trainer.shaper import __main__ as shaper
from trainer.shaper import probe, relay, rules
from trainer.shaper.__main__ import WAYS, cluster_of, wait_for_worker_end, write_report
from trainer.shaper.__main__ import main as shaper_main
from trainer.shaper.checks import checks
from trainer.shaper.probe import Link
from trainer.shaper.settings import ShaperSettings
from trainer.shaper.topology import PeerLink, links_of, uniform
from trainer.verifier import faults as faults_of_verdict


def profile_of(environ) -> Profile:
    return ShaperSettings.from_env(environ).profile


def test_profiles_by_name_and_field_by_field():
    assert profile_of({}) == PROFILES["lan"]
    assert profile_of({"TF_NETWORK_PROFILE": "wan"}) == Profile(name="wan", rtt_ms=50, jitter_ms=5)
    custom = profile_of({"TF_NETWORK_PROFILE": "thin", "TF_NETWORK_RATE_MBIT": "20", "TF_NETWORK_LOSS": "2%"})
    assert custom == Profile(name="thin+custom", rate_mbit=20, loss=0.02)
    assert custom.describe() == "thin+custom (loss 2.0%, rate 20 Mbit/s)"


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"TF_NETWORK_PROFILE": "moon"}, "`TF_NETWORK_PROFILE` ('moon') must be one of lan, wan, lossy, thin"),
        ({"TF_NETWORK_RTT_MS": "fast"}, "`TF_NETWORK_RTT_MS` ('fast') must be a number"),
        ({"TF_NETWORK_LOSS": "0.9"}, "`TF_NETWORK_LOSS` (0.9) must be in [0, 0.5]"),
        ({"TF_NETWORK_LOSS": "60%"}, "`TF_NETWORK_LOSS` (0.6) must be in [0, 0.5]"),
        ({"TF_NETWORK_RTT_MS": "20000"}, "`TF_NETWORK_RTT_MS` (20000) must be in [0, 10000]"),
        ({"TF_NETWORK_PROFILE": "moon", "TF_NETWORK_RTT_MS": "fast"}, "`TF_NETWORK_PROFILE` ('moon')"),
        ({"TF_NETWORK_PROFILE": "wan", "TF_NETWORK_JITTER_MS": "40"}, "must be at most half of `TF_NETWORK_RTT_MS`"),
    ],
)
def test_a_bad_profile_is_named_in_one_line(environment, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        profile_of(environment)


def test_the_shaper_reads_its_worker_and_results_directory():
    settings = ShaperSettings.from_env({"SHAPED_WORKER": " worker-1 ", "TF_RESULTS_DIR": "/elsewhere"})
    assert (settings.worker, settings.results_dir) == ("worker-1", "/elsewhere")
    assert ShaperSettings.from_env({}).results_dir == "/results"


def test_partition_and_heal_need_only_the_workers_name():
    environ = {"SHAPED_WORKER": "worker-1", "TF_NETWORK_PROFILE": "moon"}
    assert ShaperSettings.from_env(environ, only=("worker",)).worker == "worker-1"


@pytest.mark.parametrize("argv", [["partition", "sideways"], ["heal", "in"], ["partition", "in", "out"], ["cut"]])
def test_a_cut_the_shaper_does_not_know_is_one_line_and_exit_2(argv, capsys, monkeypatch):
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # Not in pytest's own process.
    assert shaper_main(argv) == 2
    assert capsys.readouterr().err == (
        f"shaper: config error: unknown command {' '.join(argv)!r} "
        "(usage: python -m trainer.shaper [partition [both | in | out] | heal])\n"
    )
    # Each way is a set of the rules' chains: in, what arrives; out, what leaves; both, the two.
    assert rules.DIRECTIONS["both"] == rules.DIRECTIONS["in"] + rules.DIRECTIONS["out"]
    assert set(rules.DIRECTIONS) == set(WAYS)


def test_the_shapers_report_is_the_one_the_launcher_and_the_verifier_read(tmp_path):
    report = {"worker": "worker-1", "profile": "wan", "links": [{"peer": "worker-0", "rtt_ms": 51.2}], "run": "r1"}
    write_report(str(tmp_path), "worker-1", report)
    assert shaping.read_report(str(tmp_path), "worker-1", "r1") == report
    assert shaping.read_report(str(tmp_path), "worker-1", "an earlier run") is None
    # Written whole, by a rename: nothing else is left beside it.
    assert [path.name for path in tmp_path.iterdir()] == [shaping.report_path(str(tmp_path), "worker-1").name]


def test_the_shaper_finds_its_cluster_and_waits_on_the_lock_the_launcher_keeps(tmp_path):
    files = WorkerFiles(tmp_path, "worker-1")
    recorder = Recorder(files, workers=["worker-0:12345", "worker-1:12345", "worker-2:12345"], run="r1")
    assert cluster_of(WorkerFiles(tmp_path, "worker-1"), timeout=1) == (12345, ["worker-0", "worker-2"], "r1")
    waiting = threading.Thread(target=wait_for_worker_end, args=(WorkerFiles(tmp_path, "worker-1"),), daemon=True)
    waiting.start()
    waiting.join(timeout=0.3)
    assert waiting.is_alive()  # The launcher still holds its lock.
    recorder.finish(0)
    waiting.join(timeout=5)
    assert not waiting.is_alive()


@pytest.fixture
def loop():
    """An event loop in a thread of its own, as the shaper runs its relays."""
    running = asyncio.new_event_loop()
    running.servers = []
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    yield running
    for server in running.servers:
        running.call_soon_threadsafe(server.close)

    async def shut_down():  # Every relayed connection closes while the loop still runs.
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run_coroutine_threadsafe(shut_down(), running).result(timeout=5)
    running.call_soon_threadsafe(running.stop)
    thread.join(timeout=5)
    running.close()


def start_relay(loop, target_port, one_way_ms, jitter_ms=0.0, seed=1):
    port = free_port()
    delay = relay.Delay(one_way_ms, jitter_ms, random.Random(seed))
    loop.servers.append(asyncio.run_coroutine_threadsafe(relay.serve(port, target_port, delay), loop).result(timeout=5))
    return port


def test_the_relay_adds_the_round_trip_time_it_is_asked_for(loop):
    target = free_port()
    server = probe.Server(target)
    try:
        direct = probe.measure("127.0.0.1", port=target, deadline=0)
        relayed = probe.measure("127.0.0.1", port=start_relay(loop, target, one_way_ms=25), deadline=0)
    finally:
        server.close()
    assert direct.rtt_ms < 5
    assert 50 <= relayed.rtt_ms <= 60  # 2 x 25 ms, and a little for the relay itself.


def test_a_probe_closed_by_a_relay_with_nothing_behind_it_tries_again(loop):
    # The peer's shaper has its relay up but not yet its probe: measure until the probe is there.
    target = free_port()
    relayed = start_relay(loop, target, one_way_ms=5)
    servers = []
    threading.Timer(0.5, lambda: servers.append(probe.Server(target))).start()
    try:
        link = probe.measure("127.0.0.1", port=relayed, deadline=time.monotonic() + 10)
    finally:
        for server in servers:
            server.close()
    assert 10 <= link.rtt_ms <= 15


def test_jitter_never_reorders_a_stream(loop):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = start_relay(loop, listener.getsockname()[1], one_way_ms=5, jitter_ms=5)
        sent = bytes(random.Random(2).randbytes(2_000_000))
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listener.accept()
            with accepted:
                threading.Thread(target=lambda: (client.sendall(sent), client.shutdown(socket.SHUT_WR))).start()
                received = bytearray()
                while chunk := accepted.recv(1 << 16):
                    received += chunk
    assert received == sent


def test_loss_is_measured_from_datagrams_the_peer_counts():
    port = free_port()
    server = probe.Server(port)
    try:
        link = probe.measure("127.0.0.1", port=port, deadline=0, sink_bytes=1_000_000, loss=True)
    finally:
        server.close()
    assert link.loss == 0.0  # Loopback loses nothing: the count came back whole.
    assert link.throughput_mbit > 100


def test_checks_hold_measured_figures_to_the_profile():
    wan = PROFILES["wan"]
    assert [check.ok for check in checks(wan, Link("worker-1", rtt_ms=52.0))] == [True]
    late = checks(wan, Link("worker-1", rtt_ms=70.0))[0]
    assert not late.ok
    assert late.describe() == "rtt to worker-1 70.0 ms (expected 40.0 ms to 60.0 ms: OUTSIDE)"
    thin = checks(PROFILES["thin"], Link("worker-1", rtt_ms=0.2, throughput_mbit=96.0))
    assert [check.describe() for check in thin] == [
        "throughput to worker-1 96.0 Mbit/s (expected 80.0 Mbit/s to 120.0 Mbit/s: ok)"
    ]
    lossy = PROFILES["lossy"]
    assert checks(lossy, Link("worker-1", rtt_ms=0.2, loss=0.011))[0].ok
    assert not checks(lossy, Link("worker-1", rtt_ms=0.2, loss=0.0))[0].ok  # No drops at all: not shaped.
    assert not checks(lossy, Link("worker-1", rtt_ms=0.2, loss=0.02))[0].ok  # Twice the loss asked for.
    band = checks(lossy, Link("worker-1", rtt_ms=0.2, loss=0.0144))[0].describe()
    assert band == "loss to worker-1 1.44% (expected 0.44% to 1.56%: ok)"
    assert checks(PROFILES["lan"], Link("worker-1", rtt_ms=0.2)) == []


def test_the_shaper_defines_exactly_the_profiles_the_contract_names():
    from trainer.contract.shaping import PROFILE_NAMES

    assert tuple(PROFILES) == PROFILE_NAMES


def test_clear_removes_only_this_projects_rules_and_the_rate(monkeypatch):
    listed = {
        "filter": "-P INPUT ACCEPT\n-A INPUT -i eth0 -m comment --comment tfcluster-partition -j DROP\n"
        "-A INPUT -i eth0 -p tcp --dport 22 -j ACCEPT\n",
        "nat": "-P PREROUTING ACCEPT\n-A PREROUTING -i eth0 -p tcp -m tcp --dport 12345 -m comment --comment "
        "tfcluster -j REDIRECT --to-ports 12355\n",
    }
    ran = []

    def fake(command, **_):
        ran.append(list(command))
        output = listed[command[command.index("-t") + 1]] if "-S" in command else ""
        return subprocess.CompletedProcess(command, 0, stdout=output, stderr="")

    monkeypatch.setattr(rules.shutil, "which", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setattr(rules.subprocess, "run", fake)
    assert rules.clear() == 2
    deleted = [command for command in ran if "-D" in command]
    assert deleted == [
        [
            "iptables",
            "-w",
            "-t",
            "filter",
            "-D",
            "INPUT",
            "-i",
            "eth0",
            "-m",
            "comment",
            "--comment",
            "tfcluster-partition",
            "-j",
            "DROP",
        ],
        [
            "iptables",
            "-w",
            "-t",
            "nat",
            "-D",
            "PREROUTING",
            "-i",
            "eth0",
            "-p",
            "tcp",
            "-m",
            "tcp",
            "--dport",
            "12345",
            "-m",
            "comment",
            "--comment",
            "tfcluster",
            "-j",
            "REDIRECT",
            "--to-ports",
            "12355",
        ],
    ]  # The ACCEPT of port 22 is not the project's: kept.
    assert ran[-1] == ["tc", "qdisc", "del", "dev", "eth0", "root"]


def test_the_relay_holds_each_direction_by_its_clients_link(loop):
    target = free_port()
    server = probe.Server(target)
    # Links that differ: what 127.0.0.1 sends is held 30 ms, what it is sent 10 ms; any other client, nothing.
    routes = {"127.0.0.1": (relay.Delay(30, 0), relay.Delay(10, 0))}
    asked = []

    def route(address):
        asked.append(address)
        return routes.get(address, (relay.Delay(0, 0), relay.Delay(0, 0)))

    port = free_port()
    loop.servers.append(asyncio.run_coroutine_threadsafe(relay.serve(port, target, route), loop).result(timeout=5))
    try:
        relayed = probe.measure("127.0.0.1", port=port, deadline=0)
    finally:
        server.close()
    assert 40 <= relayed.rtt_ms <= 50  # 30 ms one way, 10 ms back.
    assert set(asked) == {"127.0.0.1"}


def test_a_link_expects_the_mean_of_its_two_directions_round_trips_and_what_it_sends():
    wan, lossy, lan = PROFILES["wan"], PROFILES["lossy"], PROFILES["lan"]
    assert PeerLink("worker-1", wan, wan).expected is wan
    one_way = PeerLink("worker-1", inbound=wan, outbound=lossy).expected
    assert (one_way.name, one_way.rtt_ms, one_way.jitter_ms, one_way.loss) == ("lossy out, wan in", 25, 2.5, 0.01)
    assert uniform([PeerLink("worker-1", lan, lan), PeerLink("worker-2", lan, lan)], lan)
    assert not uniform([PeerLink("worker-1", lan, lan), PeerLink("worker-2", wan, wan)], lan)
    settings = ShaperSettings.from_env(
        {"SHAPED_WORKER": "worker-0", "TF_NETWORK_LINKS": "worker-0 -> worker-2: wan", "TF_NETWORK_RTT_MS": "4"}
    )
    links = links_of(settings, "worker-0", ["worker-1", "worker-2"])
    # The run's profile keeps its overrides (lan+custom, 4 ms); the link's is the named profile's.
    assert [(link.peer, link.inbound.name, link.outbound.name) for link in links] == [
        ("worker-1", "lan+custom", "lan+custom"),
        ("worker-2", "lan+custom", "wan"),
    ]


def test_every_fault_is_recorded_before_the_worker_may_train_and_read_as_not_reached_when_it_ends(
    tmp_path, monkeypatch
):
    # The fresh-clone CI run of 12c2cec: a fault the training never reached was in no record when
    # the verifier looked, a moment after the workers' end and before the shaper's last word, and
    # the run passed without it. The launcher trains once the shaper's report is there: by then,
    # every fault must be recorded.
    launcher = Recorder(WorkerFiles(tmp_path, "worker-1"), workers=["worker-0:12345", "worker-1:12345"], run="r1")
    record = tmp_path / "faults-worker-1.json"
    recorded_at_report = []
    monkeypatch.setattr(shaper, "apply_afresh", lambda *arguments: asyncio.sleep(0))
    monkeypatch.setattr(shaper.probe, "Server", lambda port: type("Server", (), {"close": lambda self: None})())
    monkeypatch.setattr(shaper, "measure_all", lambda links: [])
    monkeypatch.setattr(shaper.rules, "clear", lambda: None)
    monkeypatch.setattr(
        shaper,
        "write_report",
        lambda directory, worker, report: recorded_at_report.append(json.loads(record.read_text())),
    )
    # The worker ends at once, its shaper's schedule never to say another word.
    monkeypatch.setattr(shaper, "wait_for_worker_end", lambda files: None)
    monkeypatch.setattr(shaper.schedule, "run", lambda *arguments, **keywords: None)
    faults = (
        "cut worker-1 at step 5000 for 1s; worker-0 <-> worker-1: thin at epoch 9 for 2s; cut worker-0 at step 1 for 1s"
    )
    settings = ShaperSettings.from_env(
        {"SHAPED_WORKER": "worker-1", "TF_RESULTS_DIR": str(tmp_path), "TF_NETWORK_FAULTS": faults}
    )

    assert asyncio.run(shaper.shape(settings)) == 0

    # worker-1's own two, not worker-0's cut: each shaper records the faults it applies.
    [planned] = recorded_at_report
    assert [(entry["fault"], entry["reached"]) for entry in planned] == [
        ("cut worker-1 off at step 5000 for 1s", False),
        ("worker-0 <-> worker-1: thin at epoch 9 for 2s", False),
    ]
    launcher.finish(0)
    judged = faults_of_verdict.records(tmp_path, ["worker-0", "worker-1"])
    assert faults_of_verdict.problems(judged) == (
        "fault never injected: cut worker-1 off at step 5000 for 1s (the training ended before it): "
        "the run did not test it",
        "fault never injected: worker-0 <-> worker-1: thin at epoch 9 for 2s (the training ended before it): "
        "the run did not test it",
    )

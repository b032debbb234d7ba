"""Network profiles (docs/network.md): each shaped link measured and held to its
profile, training verified under it, a worker without its shaper stopped, and a partition."""

import datetime
import os
import re
import subprocess

import pytest
from tfcluster import Cluster
from tfcluster.cluster.compose import unique_name

from tests.conftest import ROOT
from tests.container.conftest import TUTORIAL_FIGURES, ComposeProject, override, problems, report_of, verdict_lines
from trainer.contract.exitcodes import ExitCode
from trainer.verifier import faults as faults_of_verdict

pytestmark = [pytest.mark.container, pytest.mark.timeout(240)]

NETWORK = "compose.network.yaml"
# A peer cut off as its launcher finds it: its name resolves, and nothing answers.
SILENT = r"resolvable, no answer within \ds"
# The default training's figures, on any network: the links change the time, never the result.
MEASURED = re.compile(
    r"^verifier-1  \| (worker-\d): network (\w+) \(.*\): measured (worker-\d) rtt ([\d.]+) ms"
    r"(?:, ([\d.]+) Mbit/s)?(?:, loss ([\d.]+)%)?$",
    re.MULTILINE,
)


def shaped_run(compose_project, profile: str) -> list[tuple]:
    project = compose_project(NETWORK, environment={"TF_NETWORK_PROFILE": profile})
    result = project.verdict(timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"verdict: PASS: 2 of 2 workers agree: {TUTORIAL_FIGURES}" in result.stdout
    links = MEASURED.findall(result.stdout)
    assert sorted((worker, peer) for worker, _, peer, *_ in links) == [
        ("worker-0", "worker-1"),
        ("worker-1", "worker-0"),
    ], result.stdout
    assert all(name == profile for _, name, *_ in links)
    for service in ("shaper-0", "shaper-1"):
        assert project.exit_code(service) == 0
        assert "OUTSIDE" not in project.logs(service)
    return links


def test_wan_adds_50_ms_of_round_trip(compose_project):
    for _, _, _, rtt, _, _ in shaped_run(compose_project, "wan"):
        assert 40 <= float(rtt) <= 60  # 50 ms, within 20 %.


@pytest.mark.timeout(450)  # Four workers' start-up on two cores, then training at 50 ms a round trip.
def test_wan_on_four_workers_shapes_and_proves_every_link(scripts_run):
    run = scripts_run("--workers", "4", "--network", "wan")
    result = run.finish(timeout=400)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    # Every worker measured its link to every other one before training: 12 links, each 50 ms. One
    # line a worker: `worker-0: network wan (...): measured worker-1 rtt 53.87 ms; worker-2 rtt ...`.
    reports = re.findall(r"^verifier-1  \| (worker-\d): network (\w+) \(.*?\): measured (.*)$", result.stdout, re.M)
    links = [
        (worker, name, *re.fullmatch(r"(worker-\d) rtt ([\d.]+) ms", link).groups())
        for worker, name, measured in reports
        for link in measured.split("; ")
    ]
    names = [f"worker-{index}" for index in range(4)]
    assert sorted((worker, peer) for worker, _, peer, _ in links) == [
        (worker, peer) for worker in names for peer in names if peer != worker
    ], result.stdout[-3000:]
    assert all(name == "wan" and 40 <= float(rtt) <= 60 for _, name, _, rtt in links), links
    assert re.search(r"^verifier-1  \| verdict: PASS: 4 of 4 workers agree", result.stdout, re.MULTILINE)
    # Its report: four workers on the timeline, and the network as the verdict measured it.
    data, opened = report_of(run, result.stderr)
    assert [worker["name"] for worker in data["workers"]] == names
    network = data["verdict"]["network"]
    assert len(network) == 4 and all(line in opened.dom for line in network), network


@pytest.mark.timeout(450)  # Four workers' start-up on two cores, then training over the slow link.
def test_two_racks_of_two_with_a_slow_link_between_them_are_measured_link_by_link():
    name, environ = unique_name("tfc-test"), dict(os.environ)
    racks = "worker-0,worker-1 <-> worker-2,worker-3: wan"
    try:
        run = Cluster(name=name, workers=4, network="lan", links=[racks], environ=environ).run()
    finally:
        Cluster(name=name, workers=4, environ=environ).down()
    assert run.passed, run.problems
    # Every link measured by its worker's shaper before training, against its own profile: inside a
    # rack the bridge as it is, between the racks 50 ms; in the record as a matrix, and in the output.
    matrix = run.verdict["links"]
    names = [f"worker-{index}" for index in range(4)]
    assert sorted(matrix) == names and all(sorted(matrix[w]) == [p for p in names if p != w] for w in names)
    for worker, row in matrix.items():
        for peer, link in row.items():
            same_rack = (worker in names[:2]) == (peer in names[:2])
            assert link["profile"] == ("lan" if same_rack else "wan"), (worker, peer, link)
            assert (link["rtt_ms"] < 5) if same_rack else (40 <= link["rtt_ms"] <= 60), (worker, peer, link)
    output = "\n".join(run.verdict_lines())
    assert "verdict: PASS: 4 of 4 workers agree" in output


@pytest.mark.timeout(450)  # Three workers' start-up on two cores, a rate measured, then 40 steps.
def test_a_link_with_its_own_rate_and_a_fault_that_makes_a_workers_links_wan_for_2s():
    # worker-2 sends worker-0 at thin's 100 Mbit/s, and worker-1 uncapped: a rate class a peer. From
    # step 6, for 2 s, every link of worker-2 is wan (50 ms), then lan again.
    name, environ = unique_name("tfc-test"), dict(os.environ, TRAIN_EPOCHS="10")
    shaped = {
        "network": "lan",
        "links": ["worker-2 -> worker-0: thin"],
        "faults": ["worker-0,worker-1 <-> worker-2: wan at step 6 for 2s"],
    }
    try:
        run = Cluster(name=name, workers=3, environ=environ, **shaped).run()
    finally:
        Cluster(name=name, workers=3, environ=environ).down()
    assert run.passed, run.problems
    matrix = run.verdict["links"]
    capped = matrix["worker-2"]["worker-0"]
    assert capped["profile"] == "thin out, lan in" and 80 <= capped["throughput_mbit"] <= 120, capped
    assert matrix["worker-2"]["worker-1"]["profile"] == "lan" and matrix["worker-2"]["worker-1"]["rtt_ms"] < 5
    # Applied by the shapers at both ends of each link it names, reported once.
    [fault] = run.verdict["faults"]
    assert fault["kind"] == "link" and fault["reached"] and 6 <= fault["step"] <= 12, fault
    assert sorted(end["by"] for end in fault["ends"] if "cut_at" in end) == ["worker-0", "worker-1", "worker-2"]
    line = faults_of_verdict.line(fault)  # What the verifier printed of it, from its record.
    found = re.fullmatch(
        r"fault: worker-0,worker-1 <-> worker-2: wan at step 6 for 2s: applied at step \d+, restored (\d+\.\d)s "
        r"later; steps (\d+\.\d+)s each before, (\d+\.\d+)s each during, (\d+\.\d+)s each after; "
        r"the training ended \d+\.\ds after the change",
        line,
    )
    assert found and 2.0 <= float(found[1]) < 3, line
    # Each step's all-reduce crosses worker-2's links at least once: 50 ms more a step while they
    # are wan, and back to what it was once they are lan again.
    before, during, after = (float(found[group]) for group in (2, 3, 4))
    assert during >= before + 0.04 and during >= after + 0.04, line


def test_lossy_drops_about_one_packet_in_a_hundred(compose_project):
    for _, _, _, _, _, loss in shaped_run(compose_project, "lossy"):
        # 5000 datagrams at 1 %: four standard deviations (trainer/shaper/checks.py's LOSS_SIGMAS) are 0.56 points.
        assert 0.44 <= float(loss) <= 1.56


def test_thin_caps_each_worker_at_100_mbit(compose_project):
    for _, _, _, _, throughput, _ in shaped_run(compose_project, "thin"):
        assert 80 <= float(throughput) <= 120


def test_lan_shapes_nothing_and_measures_the_bridge(compose_project):
    for _, _, _, rtt, throughput, loss in shaped_run(compose_project, "lan"):
        assert float(rtt) < 5 and throughput == "" and loss == ""


def test_a_worker_whose_shaper_never_reports_does_not_train(tmp_path, compose_project):
    # The profile is set on the workers, but no shaper runs beside them: they must not train unshaped.
    profile = {"TF_NETWORK_PROFILE": "wan"}
    unshaped = override(tmp_path, {"worker-0": profile, "worker-1": profile})
    project = compose_project(unshaped, environment={"TF_JOIN_TIMEOUT": "6"})
    result = project.verdict(timeout=120)
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    for service in ("worker-0", "worker-1"):
        assert project.exit_code(service) == ExitCode.CONFIG_ERROR
        assert "no network measurements from this worker's shaper within the 6s join deadline" in (
            project.logs(service)
        )
        assert "train | epoch" not in project.logs(service)


def test_a_partitioned_worker_is_lost_within_the_fail_fast_bound(compose_project):
    project = compose_project(NETWORK, environment={"TF_NETWORK_PROFILE": "lan", "TRAIN_EPOCHS": "100000"})
    started = project.compose("up", "--detach", "worker-0", "worker-1", "shaper-0", "shaper-1")
    assert started.returncode == 0, started.stderr
    project.wait_for_line("worker-0", "train | epoch:   5/")
    environment = {**project.environment, "COMPOSE_PROJECT_NAME": project.name}
    # From before the cut (what scripts/partition takes counts against the bound) to Docker's own
    # finish time of each worker: the fail-fast bound for a peer cut off, 30 s (docs/failures.md).
    injected = datetime.datetime.now(datetime.UTC)
    cut = subprocess.run(
        ["scripts/partition", "worker-1"], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert cut.returncode == 0, cut.stderr
    assert "shaper | worker-1: cut off" in cut.stdout
    codes = {service: project.wait_for_exit(service, timeout=90) for service in ("worker-0", "worker-1")}
    for service in codes:
        assert (project.finished_at(service) - injected).total_seconds() < 30
    assert codes == {"worker-0": ExitCode.PEER_LOST, "worker-1": ExitCode.PEER_LOST}
    # Each side, as docs/failures.md has it: the name still resolves, but no answer comes. A race
    # (seen in a fresh-clone CI run): TensorFlow may fail one side's program before its heartbeats
    # do, and its launcher then names the peer as it found it, silent, or ended by then (exit 5, in
    # the status the peer's launcher recorded in the results volume, which no cut reaches). Exit 5
    # either way, and the side that lost the other first says it through the network.
    logs = {service: project.logs(service) for service in codes}
    peers = {"worker-0": "worker-1", "worker-1": "worker-0"}
    silent = {
        service: re.search(rf"lost peer {peer}:12345: {SILENT} \(3 heartbeats missed\)", logs[service])
        or re.search(rf"after losing peer\(s\): {peer}:12345 \({SILENT}\)", logs[service])
        for service, peer in peers.items()
    }
    for service, peer in peers.items():
        ended = f"after losing peer(s): {peer}:12345 (exited 5 (its recorded status))"
        assert silent[service] or ended in logs[service], logs[service][-3000:]
    assert any(silent.values()), logs


def test_a_one_way_cut_loses_the_worker_that_can_no_longer_send(compose_project):
    project = compose_project(NETWORK, environment={"TF_NETWORK_PROFILE": "lan", "TRAIN_EPOCHS": "100000"})
    started = project.compose("up", "--detach", "worker-0", "worker-1", "shaper-0", "shaper-1")
    assert started.returncode == 0, started.stderr
    project.wait_for_line("worker-0", "train | epoch:   5/")
    environment = {**project.environment, "COMPOSE_PROJECT_NAME": project.name}
    injected = datetime.datetime.now(datetime.UTC)
    cut = subprocess.run(
        ["scripts/partition", "worker-1", "--direction", "out"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cut.returncode == 0, cut.stderr
    assert "shaper | worker-1: cut off (what leaves it)" in cut.stdout
    codes = {service: project.wait_for_exit(service, timeout=90) for service in ("worker-0", "worker-1")}
    # worker-1 still hears the others, but nothing of its own reaches them: worker-0 loses it.
    assert codes["worker-0"] == ExitCode.PEER_LOST, project.logs("worker-0")[-2000:]
    assert "lost peer worker-1:12345: resolvable, no answer within 2s" in project.logs("worker-0")
    assert (project.finished_at("worker-0") - injected).total_seconds() < 30
    assert codes["worker-1"] != ExitCode.OK, project.logs("worker-1")[-2000:]


def fault_lines(output: str) -> list[str]:
    return [line for line in verdict_lines(output) if line.startswith("fault: ")]


def test_a_short_cut_timed_by_training_progress_is_ridden_out_and_recorded(scripts_run):
    run = scripts_run("--network", "lan", "--fault", "cut worker-1 at step 6 for 2s", environment={"TRAIN_EPOCHS": "6"})
    result = run.finish(timeout=200)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    [line] = fault_lines(result.stdout)
    # Cut when worker-1's training had taken its 6th step (its progress is read every 0.2 s at most),
    # healed 2 s later: shorter than the three missed heartbeats that lose a peer, so training goes on.
    found = re.fullmatch(
        r"fault: cut worker-1 off at step 6 for 2s: cut at step (\d+), healed (\d+\.\d)s later; "
        r"steps (\d+\.\d+)s each before, (?:none in 2\.\ds|(\d+\.\d+)s each) during, (\d+\.\d+)s each after; "
        r"worker-1 ended (\d+\.\d)s after the cut",
        line,
    )
    assert found and 6 <= int(found[1]) <= 12 and 2.0 <= float(found[2]) < 3, line
    # The step time: a fraction of a second before; during, no step, or one that waited out the cut;
    # after, slower than before while TCP's resends back off (0.07 s, then 0.5 s, in one run).
    before, during, after = (float(found[group]) if found[group] else None for group in (3, 4, 5))
    assert before < 0.5 and (during is None or during >= 1.0) and after > 0, line
    assert re.search(r"^verdict: PASS: 2 of 2 workers agree", "\n".join(verdict_lines(result.stdout)), re.M)


def test_a_loop_that_takes_its_batches_eagerly_times_a_fault_by_its_steps(scripts_run):
    # The loop takes each batch outside its traced step: its steps were once never counted, and a
    # fault at step 50 of its 120 was said never reached (a new user's first try, in a fresh clone).
    run = scripts_run(
        "--project", "tests/fixtures/network", "--command", "python eager_input.py",
        "--network", "lan", "--fault", "cut worker-1 at step 50 for 2s",
    )  # fmt: skip
    result = run.finish(timeout=200)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    [line] = fault_lines(result.stdout)
    found = re.match(r"fault: cut worker-1 off at step 50 for 2s: cut at step (\d+), healed (\d+\.\d)s later", line)
    assert found and 50 <= int(found[1]) <= 60 and 2.0 <= float(found[2]) < 3, line
    assert problems(result.stdout) == []


def test_a_cut_longer_than_the_heartbeats_allow_fails_and_says_when_the_worker_ended(scripts_run):
    run = scripts_run(
        "--network", "lan", "--fault", "cut worker-1 at step 6 for 120s", environment={"TRAIN_EPOCHS": "100000"}
    )
    result = run.finish(timeout=200)
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    [line] = fault_lines(result.stdout)
    found = re.fullmatch(
        r"fault: cut worker-1 off at step 6 for 120s: cut at step \d+(?:; steps [^;]+)?; worker-1 ended (\d+\.\d)s "
        r"after the cut, still cut off",
        line,
    )
    # Lost within the fail-fast bound for a peer cut off (30 s, docs/failures.md), long before the heal.
    assert found and float(found[1]) < 30, line
    # Each side lost the other: the cut, not a program's error, ended the run. Either the heartbeats
    # noticed first (`stopped: lost peer(s)`) or TensorFlow failed first and the launcher then found
    # the peer gone (`after losing peer(s)`): which, on each side, is a race.
    said = problems(result.stdout)
    assert [problem.split(":", 1)[0] for problem in said] == ["worker-0", "worker-1"], said
    assert all(re.search(r"exited 5: .*(?:stopped: lost|after losing) peer\(s\)", problem) for problem in said), said


@pytest.mark.timeout(300)
def test_a_cut_the_cluster_cannot_ride_out_is_recovered_by_a_restart_with_its_links_shaped_again(scripts_run):
    run = scripts_run("--network", "wan", "--recover", "--fault", "cut worker-1 at epoch 2 for 120s")
    result = run.finish(timeout=260)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    said = verdict_lines(result.stdout)
    # Cut as epoch 2 took its first step (epoch 1's checkpoint saved first), lost within the
    # fail-fast bound, restarted once from that checkpoint, and never cut again.
    [line] = fault_lines(result.stdout)
    found = re.fullmatch(
        r"fault: cut worker-1 off at epoch 2 for 120s: cut at step [56]; steps \d+\.\d+s each before, none in "
        r"\d+\.\ds during; the cluster failed (\d+\.\d)s after the cut, still cut off, and restart 1 began it "
        r"again from its newest checkpoint",
        line,
    )
    assert found and float(found[1]) < 30, line
    # Either worker may lose the other first, and the keeper may look once both have: it names the
    # failed in the order they ended, one or both (a busy machine, two tests at once, saw both).
    failed = r"worker-[01] exited 5(?:, worker-[01] exited 5)?"
    assert any(re.fullmatch(rf"restarts: 1 of at most 3: 1: {failed}, resumed from step 4", x) for x in said), said
    assert re.search(
        r"^verdict: PASS: 2 of 2 workers agree \(after 1 restart\): .*; weights identical", "\n".join(said), re.M
    )
    # Cut once by the first run's shaper; the restarted one knew it had been, and did not cut again.
    assert len(re.findall(r"\| shaper \| cut worker-1 off at epoch 2 for 120s: cut at step", result.stdout)) == 1
    assert "shaper-1 | shaper | worker-1: 1 fault(s) injected before the restart: not again" in result.stdout
    # The shapers came back with their workers, into their new namespaces, and measured the links
    # again, shaped, before the workers trained: the keeper shows their output.
    again = re.findall(
        r"^keeper-1 +\| shaper-\d \| shaper \| (worker-\d) -> (worker-\d): rtt ([\d.]+) ms", result.stdout, re.M
    )
    assert sorted(link[:2] for link in again) == [("worker-0", "worker-1"), ("worker-1", "worker-0")], result.stdout
    assert all(40 <= float(rtt) <= 60 for *_, rtt in again), again
    assert re.search(
        rf"keeper \| restart 1 of at most 3: {failed}; restarting every worker and their 2 network shapers",
        result.stdout,
    )


def test_a_fault_the_training_never_reaches_fails_the_run(scripts_run):
    result = scripts_run("--network", "lan", "--fault", "cut worker-0 at step 5000 for 1s").finish(timeout=200)
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    assert fault_lines(result.stdout) == [
        "fault: cut worker-0 off at step 5000 for 1s: not reached, the training ended first"
    ]
    assert problems(result.stdout) == [
        "fault never injected: cut worker-0 off at step 5000 for 1s (the training ended before it): "
        "the run did not test it"
    ]


def test_partition_names_bad_input_in_one_line():
    usage = "(usage: scripts/partition WORKER [--heal | --direction in|out])"
    for arguments, message in (
        ([], f"partition: {usage[1:-1]}"),
        (["verifier"], "partition: 'verifier' is not a worker's name (worker-N)"),
        (["worker-1", "--now"], f"partition: unknown argument '--now' {usage}"),
        (["worker-1", "--direction", "sideways"], "partition: --direction 'sideways' must be in, out or both"),
        (["worker-1", "--direction"], f"partition: --direction needs in or out {usage}"),
        (
            ["worker-1", "--heal", "--direction=in"],
            "partition: --heal undoes the cut whichever way it was: no --direction with it",
        ),
    ):
        result = subprocess.run(["scripts/partition", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert (result.returncode, result.stderr) == (2, message + "\n")


def test_partition_without_a_shaped_cluster_says_so(docker):
    project = ComposeProject()
    environment = {**project.environment, "COMPOSE_PROJECT_NAME": project.name}
    result = subprocess.run(
        ["scripts/partition", "worker-1"], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "partition: could not partition worker-1: is the cluster running with compose.network.yaml (shaper-1)?"
    )

"""The report made from a run's kept record: its data, its page, and scripts/report."""

import hashlib
import json
import subprocess
import sys

import pytest
from tfcluster import report
from tfcluster.commands import report as report_command
from tfcluster.report import evidence, page

from tests.conftest import ROOT

T0 = 1_765_000_000.0


def keep(folder, *, verdict=None, logs=None, containers=None) -> None:
    """A run's record as a run keeps it (tfcluster/report/__init__.py, `keep_logs`)."""
    verdict_lines = ["verdict: PASS: 2 of 2 workers agree"] + ([json.dumps(verdict)] if verdict else [])
    texts = {"verifier": "\n".join(f"{evidence.stamp(T0 + 9)} {line}" for line in verdict_lines), **(logs or {})}
    report.keep_logs(folder, "tfc-test", texts, containers or {})


def worker_log(index: int, losses: list[float]) -> str:
    lines = [(0.5, f"launcher | worker-{index}:12345: waiting for 1 peer(s), up to 60s")]
    lines += [(1.0, f"launcher | worker-{index}:12345: all 2 workers agree on the cluster and settings after 0.5s")]
    lines += [
        (1.0 + epoch, f"train | epoch: {epoch:>3}/3   | step: {4 * epoch:>6} | loss: {loss:.4f} | accuracy: 0.5000")
        for epoch, loss in enumerate(losses, 1)
    ]
    return "".join(f"{evidence.stamp(T0 + at)} {text}\n" for at, text in lines)


RECORD = {
    "event": "verdict",
    "passed": True,
    "workers": [{"name": "worker-1", "status": "exited 0"}, {"name": "worker-0", "status": "exited 0"}],
    "synchronization": {"proven": ["state: bitwise identical"], "differences": [], "first_differing": None},
    "usage": {"worker-0": {"wall_seconds": 4.0, "cpu_seconds": 3.0, "cpu_limit": 1.0, "peak_memory": 1 << 29}},
}


def test_the_data_is_the_kept_record_s_in_the_verdict_s_order_with_each_container_s_end(tmp_path):
    containers = {"worker-0": {"started": T0, "finished": T0 + 8, "running": False, "exit_code": 0}}
    logs = {"worker-0": worker_log(0, [0.6, 0.5]), "worker-1": worker_log(1, [0.6, 0.5]), "keeper": "x\n"}
    keep(tmp_path, verdict=RECORD, logs=logs, containers=containers)
    data = report.data(tmp_path)
    assert data["verdict"] == RECORD
    assert data["summary"] == "verdict: PASS: 2 of 2 workers agree"
    assert data["project"] == "tfc-test"
    assert [w["name"] for w in data["workers"]] == ["worker-1", "worker-0"]  # The keeper is no worker.
    assert [(e["epoch"], e["loss"]) for e in data["workers"][1]["epochs"]] == [(1, 0.6), (2, 0.5)]
    assert data["workers"][1]["marks"][-1] == {"t": T0 + 8, "kind": "exit", "label": "container exited 0"}
    assert (data["origin"], data["end"]) == (T0, T0 + 8)


def test_a_later_runs_record_replaces_the_earlier_ones_logs(tmp_path):
    keep(tmp_path, logs={"worker-0": worker_log(0, [0.6]), "worker-1": worker_log(1, [0.6])})
    keep(tmp_path, logs={"worker-0": worker_log(0, [0.6])})
    assert [w["name"] for w in report.data(tmp_path)["workers"]] == ["worker-0"]


def test_a_run_without_a_verdict_says_so_and_still_shows_its_workers(tmp_path):
    keep(tmp_path, logs={"worker-0": worker_log(0, [0.6])})
    written = report.write(tmp_path)
    text = written.read_text()
    assert written == tmp_path / "report.html"
    assert "verdict: PASS: 2 of 2 workers agree" in text  # The verifier's own last line, as it said it.
    assert report.data(tmp_path)["verdict"] is None


def test_the_page_holds_everything_it_needs_and_may_load_nothing_from_outside(tmp_path):
    hostile = {**RECORD, "problems": ["</script><script>alert(1)</script>"]}
    keep(tmp_path, verdict=hostile, logs={"worker-0": worker_log(0, [0.6])})
    text = report.write(tmp_path).read_text()
    assert f'content="{page.POLICY}"' in text and "default-src 'none'" in page.POLICY
    assert page.CHART_JS.read_text() in text
    assert "<script>alert(1)" not in text  # Data stays data, in the JSON and in the list.
    assert "http://" not in text.replace("http://www.w3.org", "")  # No address to load from.


def test_a_loss_that_diverged_is_shown_as_what_it_is_not_a_page_left_unwritten(tmp_path):
    keep(tmp_path, logs={"worker-0": worker_log(0, [0.6, float("nan"), float("inf")])})
    text = report.write(tmp_path).read_text()
    assert '"loss":"nan"' in text and '"loss":"inf"' in text


def test_the_embedded_chart_js_is_debians_3_9_1_with_its_licence():
    assert hashlib.sha256(page.CHART_JS.read_bytes()).hexdigest() == page.CHART_JS_SHA256
    assert "Chart.js v3.9.1" in page.CHART_JS.read_text()[:200]
    assert "License: Expat" in (page.VENDOR / "chart.js.copyright").read_text()


def test_scripts_report_remakes_the_page_and_refuses_a_folder_without_a_record_in_one_line(tmp_path, capsys):
    keep(tmp_path / "run", verdict=RECORD, logs={"worker-0": worker_log(0, [0.6])})
    assert report_command.main([str(tmp_path / "run"), "-o", str(tmp_path / "page.html")]) == 0
    assert (tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")
    assert report_command.main([str(tmp_path / "nothing")]) == 2
    error = capsys.readouterr().err
    assert error == f"report: {tmp_path / 'nothing'}: no record of a run there (no record/ folder)\n"


@pytest.mark.parametrize("argument", ["--help"])
def test_scripts_report_runs_as_a_command(argument):
    done = subprocess.run(
        [sys.executable, "-S", str(ROOT / "scripts" / "launch.py"), "report", argument], text=True, capture_output=True
    )
    assert done.returncode == 0 and "report.html" in done.stdout

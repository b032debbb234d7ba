"""Full volumes are named, bounded and lose nothing: a results volume a chatty program fills, and a
checkpoints volume too small for the next checkpoint (trainer/contract/resultsdir.py,
trainer/training/checkpoints.py)."""

import re
import subprocess
import time

import pytest

pytestmark = [pytest.mark.container, pytest.mark.timeout(600)]

# Three times what the results volume is given below, printed at once, and then a training that
# would run to its deadline: the run must end well before it.
CHATTY = """\
import sys, time
for number in range(3000):
    print(f"{number:04d} " + "x" * 1000)
sys.stdout.flush()
time.sleep(600)
print("never")
"""
RUN_TIMEOUT = 120


def test_a_results_volume_filled_mid_run_ends_the_run_promptly_naming_it_and_the_output_reaches_docker_logs(
    scripts_run, tmp_path
):
    project = tmp_path / "chatty"
    project.mkdir()
    (project / "train.py").write_text(CHATTY)
    environment = {"TF_RESULTS_SIZE": "1m", "TF_RUN_TIMEOUT": str(RUN_TIMEOUT)}
    run = scripts_run("--project", str(project), environment=environment)
    started = time.monotonic()
    result = run.finish(timeout=RUN_TIMEOUT + 120)
    took = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode == 7, output[-3000:]
    assert took < RUN_TIMEOUT / 2, f"the run took {took:.0f}s, as if it waited for its deadline"
    problems = [line for line in output.splitlines() if "verifier-1  |   - worker-" in line]
    assert problems, output[-3000:]
    # Each worker says which volume, how big, and the setting; its launcher ended cleanly.
    named = re.compile(
        r"exited 12: launcher \| (worker-[01]):12345: the results volume /results is full \(1 MiB, TF_RESULTS_SIZE\): "
        r"this worker's log there stops after ([0-9.]+) KiB; all its output is in `docker logs`"
    )
    found = named.search(output)
    assert found, output[-3000:]
    assert "Traceback" not in output
    # Nothing the program printed is lost: docker logs has every line, in order, past what the
    # volume held, and the launcher's own last lines after them (its forwarder lived to the end).
    worker, kept = found.group(1), float(found.group(2)) * 1024
    logs = subprocess.run(
        ["docker", "logs", run.container_name(worker)], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    printed = [int(line[:4]) for line in logs if re.fullmatch(r"\d{4} x{1000}", line)]
    assert printed == list(range(len(printed)))
    assert len(printed) * 1006 > kept
    assert re.search(r"training program used .*, peak memory", "\n".join(logs))

"""Where each stalled worker was waiting, as the verdict reads it from the stack dumps in the logs."""

from trainer.contract.exitcodes import ExitCode
from trainer.verifier.stacks import dumped_threads, waiting_at
from trainer.verifier.verdict import WorkerReport, judge

# As faulthandler writes it on SIGUSR1 in the image (trainer/contract/stacks.py), from a real stall.
HUNG = """\
fault | waiting forever after step 2, as TFCLUSTER_FAULT_HANG_AT_STEP asks
launcher | worker-2:12345: stalled: no worker's program made progress for 15s (idle: this worker 15s): its stack follows
Thread 0x00007f9ed0ff9640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f9edf832040 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in wait
  File "/app/trainer/training/faults.py", line 35 in on_step
  File "/app/trainer/training/loop.py", line 66 in train
  File "/app/trainer/training/__main__.py", line 68 in main
  File "/app/trainer/training/__main__.py", line 81 in <module>
  File "<frozen runpy>", line 88 in _run_code
  File "<frozen runpy>", line 198 in _run_module_as_main
launcher | worker-2:12345: training program used 37.8s, 3.7 CPU-seconds (busy 5% of 2 CPUs), peak memory 534 MiB
"""
WAITING = """\
Current thread 0x00007fdd9434e040 (most recent call first):
  File "/opt/venv/lib/python3.11/site-packages/tensorflow/python/eager/execute.py", line 53 in quick_execute
  File "/opt/venv/lib/python3.11/site-packages/tensorflow/python/eager/context.py", line 1683 in call_function
  File "/project/train.py", line 12 in fit_one_epoch
  File "/project/train.py", line 30 in <module>
"""


def test_the_main_threads_own_code_and_innermost_frame_are_where_it_waited():
    assert waiting_at(HUNG) == "trainer/training/faults.py:35 in on_step (in threading.py:320 in wait)"
    assert (
        waiting_at(WAITING)
        == "/project/train.py:12 in fit_one_epoch (in tensorflow/python/eager/execute.py:53 in quick_execute)"
    )


def test_only_the_last_dump_counts_and_a_log_without_one_has_none():
    earlier = WAITING.replace("line 12 in fit_one_epoch", "line 99 in an_earlier_run")
    assert "an_earlier_run" not in waiting_at(f"{earlier}train | epoch 1\n{WAITING}")
    assert len(dumped_threads(HUNG)) == 2
    assert waiting_at("train | epoch 1/3\nTraceback (most recent call last):\n") is None


def test_the_verdict_names_each_stalled_worker_and_where_it_waited():
    joined = "launcher | worker-0:12345: stalled: worker-2:12345 found no worker making progress for 15s"
    declared = "launcher | worker-2:12345: stalled: no worker's program made progress for 15s (idle: this worker 15s)"
    reports = [
        WorkerReport(name="worker-0", state="exited", exit_code=ExitCode.STALLED, log=WAITING, reason=joined),
        WorkerReport(name="worker-2", state="exited", exit_code=ExitCode.STALLED, log=HUNG, reason=declared),
    ]
    verdict = judge(reports, expected_workers=2)
    assert not verdict.passed
    assert verdict.problems == (
        "worker-0: exited 10: launcher | worker-0:12345: stalled: worker-2:12345 found no worker making progress "
        "for 15s; its program was waiting at /project/train.py:12 in fit_one_epoch "
        "(in tensorflow/python/eager/execute.py:53 in quick_execute)",
        "worker-2: exited 10: launcher | worker-2:12345: stalled: no worker's program made progress for 15s "
        "(idle: this worker 15s); its program was waiting at trainer/training/faults.py:35 in on_step "
        "(in threading.py:320 in wait)",
    )

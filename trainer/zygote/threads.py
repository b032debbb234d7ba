"""Whether this process may fork: it must have no thread but the main one when it does.

`fork` copies only the calling thread; a lock another thread held at that moment stays locked in
the child for ever (tensorflow/tensorflow#8220, #51832, #13802 are hangs of that kind). Measured
in the image (docs/performance.md, "Warm workers"): importing TensorFlow and Keras leaves one
thread besides the main one, and it is NumPy's: OpenBLAS starts its pool (cores - 1 threads) when
NumPy loads it, and it is the only import that starts one (`OPENBLAS_NUM_THREADS=1`: none).
OpenBLAS registers a `pthread_atfork` handler that shuts its pool down before any fork (and starts
it again at its next call, which the zygote never makes). So the zygote attributes every thread
to the import that started it, forks once at start-up to let such handlers run (a child that
exits at once), and then must be single-threaded: it checks so again before every fork.
"""

import os
import threading
from pathlib import Path

TASKS = Path("/proc/self/task")


def extra_threads(tasks: Path = TASKS) -> list[str]:
    """The names of this process's threads besides the main one (/proc/self/task/*/comm)."""
    names = []
    for task in tasks.iterdir():
        if task.name == str(os.getpid()):
            continue
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:  # Ended since it was listed.
            continue
    return sorted(names)


def quiesce() -> None:
    """One fork of a child that exits at once, so that every pthread_atfork handler (OpenBLAS's) has run."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def unsafe_reason(started_by: dict[str, int], tasks: Path = TASKS) -> str | None:
    """Why forking now would not be safe, or None; `started_by` is how many threads each import started."""
    python_threads = [thread.name for thread in threading.enumerate() if thread is not threading.main_thread()]
    if python_threads:
        return f"Python thread {python_threads[0]!r} is running"
    left = extra_threads(tasks)
    if not left:
        return None
    by = ", ".join(f"{count} by {name}" for name, count in started_by.items() if count) or "none by the imports"
    return f"{len(left)} thread(s) besides the main one survive a fork (started: {by})"

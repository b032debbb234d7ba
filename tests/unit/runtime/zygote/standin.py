"""A zygote without TensorFlow: trainer/zygote/__main__.py's serving and forking, its imports left out.

`python standin.py` serves at TFCLUSTER_ZYGOTE_SOCKET; it prints `zygote | ready` once it listens,
and its key once at start-up, so that a test sees it restart.
"""

import ctypes
import os
import sys
import time

from trainer.contract import zygote as protocol
from trainer.zygote import child, server, threads

PR_SET_CHILD_SUBREAPER = 36


def main() -> int:
    # Orphans come to this process, as they come to a container's PID 1.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    listener = server.listening_socket(os.environ[protocol.SOCKET_VARIABLE])
    key = protocol.key_of(os.environ)
    print(f"zygote | started with key {sorted(key.items())}", flush=True)
    sys.path.pop(0)  # This file's folder, which `python -P -m trainer.zygote` would not have.
    unsafe = os.environ.get("STANDIN_UNSAFE") or threads.unsafe_reason({})

    def say(message):
        print(f"zygote | {message}", flush=True)

    # As long as TensorFlow's import, if a test asks: its launchers wait in the socket's backlog.
    time.sleep(float(os.environ.get("STANDIN_IMPORT_SECONDS", "0")))
    kept = child.Kept.now(os.environ.get("PYTHONPATH", ""))
    fork = server.Zygote(listener, key=key, unsafe=unsafe, say=say).serve()
    if fork is None:
        return 0
    child.end(child.run(fork.command, fork.environment, fork.cwd, kept), kept)


if __name__ == "__main__":
    sys.exit(main())

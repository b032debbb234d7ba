"""Where the observer's records go: JSON lines appended to the file the launcher named.

Each record is one line, `{"event": "observed", "kind": KIND, "session": S, ...}`, written with a
single `write` to a file opened for appending, so records of several processes never interleave.
`session` is new in every process that records (a program's own subprocesses that import
TensorFlow get sessions of their own, which the verifier tells apart). The launcher copies the file
into the worker's log when the program has ended (trainer/launcher/observing.py), where the
verifier reads it (trainer/verifier/observed.py): a saved log carries the records too.

The file must exist (the launcher makes it): a process given the variable but not the file, say
one started by hand in another container, records nothing rather than making files of its own.
"""

import json
import os
import time


class Journal:
    def __init__(self, path: str):
        self._path = path
        self._session = None
        self._pid = None

    def write(self, kind: str, **fields) -> None:
        if self._pid != os.getpid():  # A forked child records a session of its own.
            self._pid, self._session = os.getpid(), os.urandom(4).hex()
        record = {"event": "observed", "kind": kind, "session": self._session, "time": round(time.time(), 3)}
        line = json.dumps({**record, **fields}, separators=(",", ":"), allow_nan=False, default=str) + "\n"
        try:
            descriptor = os.open(self._path, os.O_WRONLY | os.O_APPEND)
        except OSError:
            return
        try:
            os.write(descriptor, line.encode())
        finally:
            os.close(descriptor)

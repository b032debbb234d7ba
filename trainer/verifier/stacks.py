"""Where a stalled worker's program was waiting, read from the stack dump its launcher asked for.

On a stall every worker's launcher has each Python process of its program write all its threads'
stacks to the log (trainer/contract/stacks.py), in faulthandler's format:

    Current thread 0x00007f9edf832040 (most recent call first):
      File "/usr/lib/python3.11/threading.py", line 320 in wait
      File "/app/trainer/training/faults.py", line 35 in on_step
      File "/app/trainer/training/loop.py", line 66 in train
      File "/app/trainer/training/__main__.py", line 81 in <module>

The thread that matters is the main one (the one started by the interpreter, whose outermost frame
is the script's `<module>` or runpy's): the others are helpers that wait by design. Its innermost
frame in the program's own code (outside the standard library and the installed packages) says
what the program was doing; the innermost frame of all, what it was waiting in.
"""

import dataclasses
import re
from collections.abc import Iterable

_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$")
_FRAME = re.compile(r'^\s+File "(?P<path>[^"]*)", line (?P<line>\d+) in (?P<function>\S+)$')
# Where the interpreter's own main thread starts: a script's top level, or `python -m`'s runpy.
_MAIN_ENTRIES = ("<module>", "_run_module_as_main")
# Paths of code that is not the program's own: the standard library and installed packages.
_STANDARD_LIBRARY = r"/lib/python3\.\d+/"
_LIBRARY = re.compile(rf"/(site|dist)-packages/|{_STANDARD_LIBRARY}|^<frozen ")


@dataclasses.dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{_short(self.path)}:{self.line} in {self.function}"


def dumped_threads(log: str) -> list[list[Frame]]:
    """The threads of the last stack dump in `log`, each as its frames, innermost first; [] without one.

    A dump is a run of thread headers and their frames with no other line between them.
    """
    return dumped_threads_in(log.splitlines())


def dumped_threads_in(lines: Iterable[str]) -> list[list[Frame]]:
    """`dumped_threads`, from the log's lines."""
    dump: list[list[Frame]] = []
    last: list[list[Frame]] = []
    for line in lines:
        frame = _FRAME.match(line)
        if _THREAD.match(line.strip()):
            dump.append([])
        elif frame and dump:
            dump[-1].append(Frame(frame["path"], int(frame["line"]), frame["function"]))
        elif line.strip():
            last, dump = (dump, []) if dump else (last, dump)  # Other output ends a dump.
    return [thread for thread in (dump or last) if thread]


def waiting_at(log: str) -> str | None:
    """ "trainer/training/loop.py:64 in train (in tensorflow/python/eager/execute.py:53 in quick_execute)",
    for the main thread of the last dump in `log`; None when the log holds no dump."""
    return waiting_in(log.splitlines())


def waiting_in(lines: Iterable[str]) -> str | None:
    """`waiting_at`, from the log's lines."""
    threads = dumped_threads_in(lines)
    if not threads:
        return None
    main = next((thread for thread in threads if thread[-1].function in _MAIN_ENTRIES), threads[0])
    own = next((frame for frame in main if not _LIBRARY.search(frame.path)), None)
    innermost = main[0]
    if own is None or own == innermost:
        return str(innermost)
    return f"{own} (in {innermost})"


def _short(path: str) -> str:
    """A path as a person reads it: below site-packages or the standard library's folder, or below the image's /app."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    standard = re.search(_STANDARD_LIBRARY, path)
    return path[standard.end() :] if standard else path.removeprefix("/app/")

"""A forked child becoming the run's program, as `python [-u] [-B] (-m MODULE | -c CODE | SCRIPT) ARGS` would start it.

What a fresh interpreter would have set from the command line and the environment is set again
here: the environment itself, the working directory, `sys.argv`, `sys.path` (the script's folder,
the working directory for -m, '' for -c, then the run's PYTHONPATH, then the image's own Python),
and the image's start-up hooks (stack dumps, the observer), which read the run's environment. Any
module not of the image's Python (this project's `trainer`, anything from a PYTHONPATH or a
working folder) is forgotten, so the program imports it afresh from disk. What cannot be set again
(the interpreter's flags, what Python and TensorFlow read at start-up) is the zygote's key
(trainer/contract/zygote.py): a run gets a zygote whose key is its own.

The child ends as Python's shutdown would end the program: non-daemon threads joined, the atexit
handlers run (TensorFlow's, a program's own), then the modules the program imported (its
`__main__` among them) destroyed with what they hold, every open file flushed, and `os._exit`.
An object may write what it holds only as it is destroyed (a writer whose `__del__` or C++
destructor flushes it): ending before that left its file empty. What is not done is the teardown
of the zygote's own modules, TensorFlow's 2,800 and its runtime: 0.6 to 0.9 s of every run here
(1.2 to 1.5 s in a forked child, each page of the zygote's copied as it is freed), which a later
process could see nothing of but what TensorFlow's own module state holds.
"""

import atexit
import gc
import io
import os
import runpy
import signal
import sys
import sysconfig
import threading
from dataclasses import dataclass
from typing import NoReturn

# The options of `python` a child can honour: each is a no-op where the zygote already runs so.
HONOURED = {
    "-u": lambda: os.environ.get("PYTHONUNBUFFERED", "") != "",
    "-B": lambda: sys.dont_write_bytecode,
}


@dataclass(frozen=True)
class Kept:
    """What a child keeps of its zygote's interpreter, found once in the zygote, before any fork.

    `base_path`: sys.path without the zygote's own PYTHONPATH. `foreign`: the modules not of the
    image's Python, to be forgotten. Finding them means a realpath for each of 2,800 modules:
    3.4 s through this engine's fuse-overlayfs, too much for every run; a path that starts with
    the standard library's or site-packages' own needs none. `modules`: the rest, each a child's
    own unless the program imports it afresh; any other module at a child's end is the program's.
    """

    base_path: tuple[str, ...]
    foreign: frozenset[str]
    modules: dict

    @classmethod
    def now(cls, pythonpath: str) -> "Kept":
        own = {os.path.abspath(entry) for entry in pythonpath.split(os.pathsep) if entry}
        names = ("stdlib", "platstdlib", "purelib", "platlib")
        given = {sysconfig.get_paths()[name] + os.sep for name in names}
        image = tuple(sorted(given | {os.path.realpath(path) + os.sep for path in given}))
        foreign = set()
        for name, module in list(sys.modules.items()):
            origins = [getattr(module, "__file__", None), *list(getattr(module, "__path__", None) or [])]
            for origin in (origin for origin in origins if isinstance(origin, str)):
                if not origin.startswith(image) and not os.path.realpath(origin).startswith(image):
                    foreign.add(name)
        modules = {name: module for name, module in sys.modules.items() if name not in foreign}
        return cls(tuple(entry for entry in sys.path if entry not in own), frozenset(foreign), modules)


@dataclass(frozen=True)
class Command:
    kind: str  # "module", "code" or "script"
    target: str
    arguments: list[str]


def parse(argv: list[str]) -> Command | str:
    """The command as `python` reads it, or why a forked child cannot run it (a string)."""
    if not argv or not os.path.basename(argv[0]).startswith("python"):
        return f"{argv[0] if argv else 'an empty command'!r} is not Python"
    if _resolved(argv[0]) != os.path.realpath(sys.executable):
        return f"{argv[0]!r} is another interpreter than the zygote's ({sys.executable})"
    words = argv[1:]
    while words and words[0].startswith("-") and words[0] not in ("-m", "-c", "-"):
        option = words.pop(0)
        if option not in HONOURED or not HONOURED[option]():
            return f"`python {option}` sets what the zygote's interpreter was started without"
    if not words or words[0] == "-":
        return "a program read from standard input"
    if words[0] in ("-m", "-c"):
        if len(words) < 2:
            return f"`python {words[0]}` without its argument"
        kind = "module" if words[0] == "-m" else "code"
        return Command(kind, words[1], words[2:])
    return Command("script", words[0], words[1:])


def run(command: Command, environment: dict[str, str], cwd: str, kept: Kept) -> int:
    """Runs the program in this process; returns its exit status as `python` would end with it."""
    try:
        return become(command, environment, cwd, kept)
    except SystemExit as exit:
        return _exit_status(exit.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        return -signal.SIGINT  # Python ends itself by SIGINT then, so that its parent sees that.
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1


def end(status: int, kept: Kept) -> NoReturn:
    """The start of Python's own shutdown, then the process's end (see the module's docstring)."""
    threading._shutdown()  # What the interpreter does first at exit: wait for non-daemon threads.
    atexit._run_exitfuncs()
    _destroy_the_programs_modules(kept)
    for stream in _open_files():
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S112 - a file the program broke is its own; flush the rest.
            continue
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status & 0xFF)


def become(command: Command, environment: dict[str, str], cwd: str, kept: Kept) -> int:
    """Makes this process the program and runs it; returns 0 if it ran to its end."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(environment)
    for name in kept.foreign:
        sys.modules.pop(name, None)
    sys.path[:] = [_first_path(command), *_pythonpath(environment), *kept.base_path]
    _install_start_up_hooks()
    if command.kind == "module":
        sys.argv = [command.target, *command.arguments]  # runpy puts the module's path in argv[0].
        runpy.run_module(command.target, run_name="__main__", alter_sys=True)
    elif command.kind == "script":
        sys.argv = [command.target, *command.arguments]
        runpy.run_path(command.target, run_name="__main__")
    else:
        sys.argv = ["-c", *command.arguments]
        main = sys.modules["__main__"] = type(sys)("__main__")
        exec(compile(command.target, "<string>", "exec"), main.__dict__)  # noqa: S102 - what `python -c` does.
    return 0


def _destroy_the_programs_modules(kept: Kept) -> None:
    """The program's modules forgotten, latest first, as Python's shutdown forgets them, and what
    only they held destroyed. The zygote's objects are frozen (trainer/zygote/__main__.py): the
    collection passes over them, leaving their pages shared."""
    programs = [name for name, module in sys.modules.items() if kept.modules.get(name) is not module]
    for name in reversed(programs):
        sys.modules.pop(name, None)
    del programs
    sys.last_type = sys.last_value = sys.last_traceback = None
    gc.collect()


def _exit_status(code) -> int:
    """`sys.exit(code)` as Python ends with it: None 0, a number itself, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _open_files() -> list:
    """Every open Python file with a buffer that may hold unwritten data, standard streams last."""
    found = [
        item
        for item in gc.get_objects()
        if isinstance(item, io.TextIOWrapper | io.BufferedWriter | io.BufferedRandom)
        and item not in (sys.stdout, sys.stderr)
    ]
    return [item for item in found if not item.closed] + [sys.stdout, sys.stderr]


def _resolved(executable: str) -> str:
    if os.sep in executable:
        return os.path.realpath(executable)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(folder, executable)
        if os.access(candidate, os.X_OK):
            return os.path.realpath(candidate)
    return executable


def _first_path(command: Command) -> str:
    if command.kind == "script":
        return os.path.dirname(os.path.realpath(command.target))
    return os.getcwd() if command.kind == "module" else ""


def _pythonpath(environment: dict[str, str]) -> list[str]:
    return [os.path.abspath(entry) for entry in environment.get("PYTHONPATH", "").split(os.pathsep) if entry]


def _install_start_up_hooks() -> None:
    """What the image's .pth files did at the zygote's start, again with the run's environment."""
    for name in ("_tfcluster_stacks", "_tfcluster_observer"):
        module = sys.modules.get(name)
        if module is not None:
            module.install(os.environ)

"""Calls a function right after a module has been imported, whoever imports it, and imports nothing itself.

Python has no post-import hook of its own (PEP 369 was withdrawn), so this is the usual one, as
wrapt's `register_post_import_hook` does it: a finder first on `sys.meta_path` that finds the
module's spec with the finders after it, and runs the hook once the module's own loader has
executed it. wrapt itself is not used because importing it would load a C extension into every
Python process of the image at start-up; this needs only `importlib`.

The module keeps its own loader (`__loader__` and `__spec__.loader` are set back before it runs),
so nothing the module does with them changes. A hook that raises is ignored and
the import goes on: the hooks given here record their own errors (trainer/observer/points.py).
"""

import contextlib
import importlib.abc
import sys
import threading

_hooks: dict[str, list] = {}
_lock = threading.Lock()


def after_import(name: str, hook) -> None:
    """Runs `hook(module)` once module `name` has been imported (at once if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        _run(hook, module)
        return
    with _lock:
        _hooks.setdefault(name, []).append(hook)
        if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
            sys.meta_path.insert(0, _Finder())


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        # The hooks stay registered until the module is executed: a lookup alone (TensorFlow asks
        # `importlib.util.find_spec("tf_keras")` before it imports it) must not use them up.
        with _lock:
            if name not in _hooks:
                return None
        spec = _spec_from_the_others(self, name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Chained(spec.loader, name)
        return spec


def _spec_from_the_others(me, name, path, target):
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if finder is me or find is None:
            continue
        spec = find(name, path, target)
        if spec is not None:
            return spec
    return None


class _Chained(importlib.abc.Loader):
    """The module's own loader, with the hooks run after it has executed the module."""

    def __init__(self, loader, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        with _lock:
            hooks = _hooks.pop(self._name, [])
        for hook in hooks:
            _run(hook, module)


def _run(hook, module) -> None:
    # The observer must never break the program's import.
    with contextlib.suppress(Exception):
        hook(module)

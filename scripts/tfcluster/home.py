"""An installed tfcluster's root: a per-user copy of the harness's files that its wheel carries.

A run needs a root it may write to: scripts/setup writes its choice of base image to .env and the
wheels into docker/wheels (inside the image's build context), a run its generated files into
.tfcluster/runs/. In a checkout the root is the checkout. An installed distribution carries the
same files in tfcluster/_home (hatch_build.py), and scripts/tfcluster as the package itself, in a
site-packages that may be read-only, shared, and is no place for state. So they are copied into
a folder of the user's cache, ${XDG_CACHE_HOME:-~/.cache}/tfcluster/home (or TFCLUSTER_HOME),
again whenever the installed files change; what is state there (the wheelhouse, 700 MB; .env;
.tfcluster/) is kept from one version to the next. The copy is checkout-shaped: everything runs
from it as from a checkout.
"""

import fcntl
import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

# What the wheel carries beside the package, under tfcluster/ (hatch_build.py writes it there).
INSTALLED = "_home"
# Where a checkout has the package.
PACKAGE = Path("scripts") / "tfcluster"
# The copy's record of what it was copied from: the stamp, then each file's path.
MANIFEST = Path(".tfcluster") / "installed-files"
LOCK = Path(".tfcluster") / "installed.lock"


def root_of(package: Path) -> Path:
    """The harness's root for the host package at `package`: installed (the wheel's files beside
    it), its per-user copy, made or brought up to date; else the checkout it lies in, whatever of
    it is there (scripts/tfcluster -> the root)."""
    if (package / INSTALLED).is_dir():
        return synced(package)
    return package.parents[1]


def location(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the copy goes: TFCLUSTER_HOME, else tfcluster/home in the user's cache folder."""
    if environ.get("TFCLUSTER_HOME"):
        return Path(environ["TFCLUSTER_HOME"]).expanduser().resolve()
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser().resolve() / "tfcluster" / "home"


def files(package: Path) -> dict[str, Path]:
    """The copy's paths -> the installed files: tfcluster/_home's, and the package's own files as
    scripts/tfcluster/, a checkout's place for it (its bytecode left out)."""
    found = {}
    for path in sorted(package.rglob("*")):
        relative = path.relative_to(package)
        if not path.is_file() or "__pycache__" in relative.parts:
            continue
        if relative.parts[0] == INSTALLED:
            found[str(relative.relative_to(INSTALLED))] = path
        else:
            found[str(PACKAGE / relative)] = path
    return found


def _stamp(package: Path, found: dict[str, Path]) -> str:
    # Names, sizes and times, not content: this runs before every command, and an installed
    # file changes only with a new install, which writes it anew.
    digest = hashlib.sha256(str(package).encode())
    for name, path in found.items():
        status = path.stat()
        digest.update(f"{name}\0{status.st_size}\0{status.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _copy(source: Path, target: Path) -> None:
    # The wheel need not keep a file's mode: a script (#!) is made executable whatever it came as.
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    shutil.copyfile(source, partial)
    with source.open("rb") as opened:
        executable = opened.read(2) == b"#!"
    partial.chmod(0o755 if executable else 0o644)
    os.replace(partial, target)  # A run that reads the file meanwhile sees the old or the new one.


def synced(package: Path, target: Path | None = None) -> Path:
    """The copy of the installed `package`'s files at `target` (default: location()), brought up
    to date; its path."""
    target = target or location()
    found = files(package)
    names = list(found)
    stamp = _stamp(package, found)
    manifest = target / MANIFEST
    if _recorded(manifest)[:1] == [stamp]:
        return target
    manifest.parent.mkdir(parents=True, exist_ok=True)
    with (target / LOCK).open("w") as lock:
        # Two commands started at once (two pytest sessions) copy one after the other.
        fcntl.flock(lock, fcntl.LOCK_EX)
        recorded = _recorded(manifest)
        if recorded[:1] != [stamp]:
            for name in names:
                _copy(found[name], target / name)
            for gone in set(recorded[1:]) - set(names):  # An earlier version's file this one has not.
                (target / gone).unlink(missing_ok=True)
            manifest.write_text("\n".join([stamp, *names]) + "\n", encoding="utf-8")
    return target


def _recorded(manifest: Path) -> list[str]:
    try:
        return manifest.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []

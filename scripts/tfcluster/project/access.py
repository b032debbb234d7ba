"""Whether the workers can read what a run mounts (--project, --data, the script a command names):
checked on the host, before anything starts.

The workers run as uid 1000 (layout.WORKER_UID), and a bind mount keeps the host's owners and
modes, so a folder of mode 0700 owned by anyone else (as `mktemp -d` makes them, and many CI
scripts) is one the workers cannot even enter: found on the host, it is one line naming the path,
its mode and owner, and the fix, instead of a whole cluster started to fail on every worker with
a container path. A baked project is not checked: its files go into the image readable to all,
whatever their modes on disk (tfcluster/project/baking.py). Only what a run surely
needs is checked (the folders, and the script on the way to it): a file the workers may not read
(a secret of 0600 beside the code) may be meant so, and the launcher takes it as unreadable.
Running the workers as the caller instead would not do: here the caller is often root, and a
worker must never be.
"""

import grp
import os
import pwd
import stat

from tfcluster.errors import Refusal
from tfcluster.project.layout import WORKER_GID, WORKER_UID


def can_read(info: os.stat_result) -> bool:
    """Whether uid WORKER_UID can read it (and, for a folder, list and enter it), as the kernel decides."""
    owner, group = info.st_uid, info.st_gid
    needed = (stat.S_IROTH | stat.S_IXOTH) if stat.S_ISDIR(info.st_mode) else stat.S_IROTH
    if owner == WORKER_UID:
        needed <<= 6  # The owner's bits.
    elif group == WORKER_GID:
        needed <<= 3  # The group's.
    return info.st_mode & needed == needed


def check_readable(option: str, top: str, path: str | None = None) -> None:
    """Refuses, in one line, a folder `top` the workers could not read, or any folder on the way
    from it to `path` or `path` itself; raises Refusal."""
    chain = [top]
    if path is not None:
        relative = os.path.relpath(path, top)
        parts = relative.split(os.sep)
        chain += [os.path.join(top, *parts[: index + 1]) for index in range(len(parts))]
    for step in chain:
        info = os.stat(step)
        if not can_read(info):
            raise Refusal(_refusal(option, top, step, info))


def _refusal(option: str, top: str, path: str, info: os.stat_result) -> str:
    kind = "folder" if stat.S_ISDIR(info.st_mode) else "file"
    where = ": " if path == top else f": {path}, "
    owner = f"{_name(pwd.getpwuid, info.st_uid)}:{_name(grp.getgrgid, info.st_gid)}"
    return (
        f"{option} {top}{where}a {kind} of mode {stat.S_IMODE(info.st_mode):04o} owned by {owner}, which the workers "
        f"(uid {WORKER_UID}) cannot read; make it readable to them: chmod a+rX {path}"
    )


def _name(lookup, number: int) -> str:
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)

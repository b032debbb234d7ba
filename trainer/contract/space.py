"""A volume out of room, as the results and checkpoints volumes report it (both are bounded tmpfs
or quota'd mounts, TF_RESULTS_SIZE and TF_CHECKPOINTS_SIZE): ENOSPC, or EDQUOT on a quota."""

import errno

NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


def out_of_room(error: BaseException) -> bool:
    """Whether `error` is a write that found its volume full."""
    return isinstance(error, OSError) and error.errno in NO_ROOM

"""The names your program's environment may not set: the harness's own, and its settings."""

import re

from tfcluster.errors import Refusal

# -- Names your environment may not set -----------------------------------------------------------
#
# The one list of them (docs/bring-your-own.md, "Your program's environment"). Compose's
# `environment:` wins over `env_file`, so most of these could not be overridden anyway; they are
# refused all the same, so that nothing you ask for is silently dropped.

# Set by the harness on every worker: the cluster, the paths, the process's own environment.
# Tuples, not sets: scripts/run --help lists them in this order (docs/commands.md is made from it).
HARNESS_NAMES = (
    "TF_CONFIG",
    "TF_TASK_INDEX",
    "TF_TASK_SLOT",
    "TF_WORKER_HOSTS",
    "TF_WORKER_PORT",
    "TF_RENDEZVOUS_PORT",
    "TF_RESULTS_DIR",
    "TF_CHECKPOINT_DIR",
    "JOB_COMPLETION_INDEX",
    "PATH",
    "HOME",
    "PYTHONPATH",
    # The env file is the whole container's, the launcher's Python included: these would change
    # how the launcher itself runs (warnings turned into errors, another interpreter's library).
    "PYTHONHOME",
    "PYTHONWARNINGS",
    "PYTHONINSPECT",
    "PYTHONSAFEPATH",
)
HARNESS_PREFIXES = ("TFCLUSTER_",)
# The harness's settings: yours to choose, but for the whole cluster (the deadlines, the limits, the
# built-in trainer's and the network's settings), so they are set as variables of scripts/run,
# which compose.yaml passes on (docs/settings.md), not as your program's.
SETTING_NAMES = (
    "TF_CHIEF",
    "TF_JOIN_TIMEOUT",
    "TF_RUN_TIMEOUT",
    "TF_STOP_GRACE",
    "TF_STALL_TIMEOUT",
    "TF_DATA_SHARDING",
    "TF_STARTUP_LOGS",
    "TF_RESTART_LIMIT",
    "TF_WORKER_MEMORY",
    "TF_WORKER_CPUS",
)
SETTING_PREFIXES = ("TRAIN_", "TF_NETWORK_")

# A name a process can be given and a shell can say; Compose allows more (dots, dashes), but
# TFCLUSTER_USER_ENV lists names separated by commas, and a program reads them from os.environ.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME_RULE = "letters, digits and _, not starting with a digit"


def reserved(name: str) -> str | None:
    """Why `name` is not yours to set, or None if it is."""
    if name in HARNESS_NAMES or name.startswith(HARNESS_PREFIXES):
        return f"{name} is set by the harness on every worker, not by you (docs/bring-your-own.md)"
    if name in SETTING_NAMES or name.startswith(SETTING_PREFIXES):
        return (
            f"{name} is a setting of the harness: set it in scripts/run's environment instead "
            f"({name}=... scripts/run ...; docs/settings.md)"
        )
    return None


def check_name(name: str) -> None:
    if not NAME.fullmatch(name):
        raise Refusal(f"{name!r} is not a variable name ({NAME_RULE})")
    reason = reserved(name)
    if reason:
        raise Refusal(reason)

"""The Python API from another process: `launch.py driven REQUEST RESULT`, JSON in, JSON out.

The pytest plugin (tfcluster/installed/plugin.py) runs every cluster through this rather than in
your test's own process, where a `trainer` package of your project's would hide the harness's
(`trainer.contract`, which the API needs): launch.py puts the harness first on this process's
path, and the two processes talk in data. REQUEST holds `{"action": "run" | "down" | "warm_down", "cluster":
{FIELD: VALUE}}`, the fields of `Cluster` (its paths absolute, or from this process's working
directory); RESULT is written with the `Run` as `Run.as_data()` gives it (for "down", its status).
The run prints what `scripts/run` prints, so a test's captured output holds the cluster's lines.

exit status: the run's (scripts/run's); 2 for a request that is not one, or a Cluster it refuses.
"""

import json
import sys
from pathlib import Path

from tfcluster.cluster.api import Cluster
from tfcluster.cluster.result import Run
from tfcluster.errors import Refusal
from trainer.contract.exitcodes import ExitCode

ACTIONS = ("run", "down", "warm_down")


def _perform(request: dict) -> Run:
    action = request.get("action")
    if action not in ACTIONS:
        raise Refusal(f"action {action!r} is not one of {', '.join(ACTIONS)}")
    try:
        cluster = Cluster(**(request.get("cluster") or {}))
    except TypeError as error:  # A field Cluster has not: its own words name it.
        raise Refusal(str(error).replace(".__init__()", "")) from None
    if action == "down":
        return Run(cluster.down(), False, None, name=cluster.name)
    if action == "warm_down":
        return Run(cluster.warm_down(), False, None, name=cluster.name)
    return cluster.run()


def main(arguments: list[str]) -> int:
    if len(arguments) != 2:
        print("driven: usage: launch.py driven REQUEST RESULT (JSON files)", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    request_file, result_file = (Path(argument) for argument in arguments)
    try:
        run = _perform(json.loads(request_file.read_text(encoding="utf-8")))
    except (OSError, ValueError, Refusal) as error:
        print(f"run: {error}", file=sys.stderr)
        run = Run(ExitCode.CONFIG_ERROR, False, None)
    result_file.write_text(json.dumps(run.as_data()), encoding="utf-8")
    return run.status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

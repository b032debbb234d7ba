"""The results volume filling up, as the recorder finds it (trainer/contract/resultsdir.py).

A run whose log cannot be kept cannot be judged, and waiting would only reach the deadline: at the
first line that does not fit, the launcher says so on its own output (which `docker logs` keeps),
and stops its program at once; it then ends with exit 12 and the same line as its reason, whatever
else the stopped program led to (its peers' loss, say).
"""

import sys
from collections.abc import Callable
from pathlib import Path

from trainer.contract import resultsdir, space
from trainer.contract.console import failed_event
from trainer.contract.exitcodes import ExitCode
from trainer.contract.usage import size_text


class FullResults:
    """Watches a recorder for a full volume; `error` is set once it has been found so."""

    def __init__(self, recorder: resultsdir.Recorder | None, *, say: Callable[[str], str], stop: Callable[[], None]):
        self._recorder = recorder
        self._say = say
        self._stop = stop
        self.error: OSError | None = None
        if recorder is not None:
            recorder.on_full = self._found

    def _found(self, error: OSError) -> None:
        # From whichever thread printed the line: the forwarder's, the watchdog's, the main one. A
        # program not started yet is stopped as it starts (trainer/launcher/program.py).
        self.error = error
        self._say(f"{self.message()}; stopping the program")
        self._stop()

    def outcome(self, exit_code: int, reason: str | None, *, signalled: bool) -> tuple[int, str | None]:
        """How the run ended, as the launcher records it: a full volume is why, but under a signal."""
        if self.error is None or signalled:
            return exit_code, reason
        return ExitCode.VOLUME_FULL, self._say(self.message())

    def message(self) -> str:
        directory = self._recorder.directory
        size = resultsdir.volume_size(directory)
        why = "full" if space.out_of_room(self.error) else "not writable"
        shown = size_text(size) if size else "size unknown"
        return (
            f"the results volume {directory} is {why} ({shown}, TF_RESULTS_SIZE): this worker's log there stops "
            f"after {size_text(self._recorder.written)}; all its output is in `docker logs`"
        )


def at_start(error: OSError, directory: str, host: str) -> int:
    """A volume already full (or not writable) when the launcher starts (a keeper's restart after a
    chatty run, say): its first status cannot be written, so the run ends before it begins, saying
    so as at any other write, exit 12."""
    size = resultsdir.volume_size(Path(directory))
    why = "full" if space.out_of_room(error) else f"not writable ({error.strerror or error})"
    shown = size_text(size) if size else "size unknown"
    message = (
        f"launcher | {host}: the results volume {directory} is {why} ({shown}, TF_RESULTS_SIZE) before this "
        "worker started: its status and log cannot be kept there, so it does not train"
    )
    print(message, file=sys.stderr, flush=True)
    print(failed_event(ExitCode.VOLUME_FULL, message), flush=True)
    return ExitCode.VOLUME_FULL

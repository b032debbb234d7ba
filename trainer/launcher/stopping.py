"""A signal's request to stop, which every waiting phase of the launcher watches for.

The signal handler only records the request (and stops the program); each phase notices it at its
next wait and raises Stopped, so the run ends through the same path as any other failure.
"""

import threading

from trainer.launcher.failures import Stopped


class StopRequest:
    def __init__(self):
        self._requested = threading.Event()
        self._signal_number: int | None = None

    def request(self, signal_number: int) -> bool:
        """Records the request; False if one came before (a second signal changes nothing)."""
        if self._signal_number is not None:
            return False
        self._signal_number = signal_number
        self._requested.set()
        return True

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    def check(self) -> None:
        """Raises Stopped if a stop was requested."""
        if self._requested.is_set():
            raise Stopped(self._signal_number)

    def pause(self, seconds: float) -> None:
        """Waits up to `seconds`, and raises Stopped as soon as a stop is requested."""
        if self._requested.wait(seconds):
            raise Stopped(self._signal_number)

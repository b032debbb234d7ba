"""What the program's optimizers trained: the variables they updated, held alive, and the steps they took.

The observer (trainer/observer/points.py) is told of every optimizer update (trainer/observer/patches.py)
and keeps here, strongly, each variable an optimizer updated and the optimizer itself: a program
that frees its model before it exits (`del model; gc.collect()`, a `main()` that returns) still has
its trained weights fingerprinted at its end, after their last update. It also keeps each
optimizer's step at its first update in this process, and the bytes of the dense gradients it
applies, from which the verifier bounds the traffic the steps must have made
(trainer/verifier/traffic.py). Standard library only; the few reads of a variable's value go
through trainer/observer/fingerprint.py.
"""


class Training:
    def __init__(self):
        self._trained: dict[int, object] = {}
        self._optimizers: dict[int, object] = {}
        self._first_steps: dict[int, int | None] = {}  # Each optimizer's step when this process first updated.
        self._gradient_bytes: dict[int, int] = {}  # What one step of each optimizer all-reduces, dense.

    def seen(self, optimizer) -> None:
        """Before an update: the optimizer's step, the first time (where this process took it up)."""
        if id(optimizer) not in self._first_steps:
            from . import fingerprint

            self._first_steps[id(optimizer)] = fingerprint.step_now(optimizer)

    def applied(self, optimizer, gradient_bytes: int) -> None:
        self._gradient_bytes[id(optimizer)] = max(self._gradient_bytes.get(id(optimizer), 0), gradient_bytes)

    def updated(self, optimizer, variables, *, eagerly: bool) -> None:
        """After an update (`eagerly`: it ran, rather than being traced)."""
        if self._first_steps.get(id(optimizer)) is None:
            # A legacy optimizer makes its step counter at its first update: this one was its first.
            from . import fingerprint

            now = fingerprint.step_now(optimizer)
            self._first_steps[id(optimizer)] = None if now is None else now - 1 if eagerly else now
        self._optimizers.setdefault(id(optimizer), optimizer)
        for variable in variables:
            if variable is not None:
                self._trained.setdefault(id(variable), variable)

    def variables(self) -> list:
        """Every variable an optimizer updated, and every optimizer's own (its step, its slots)."""
        return [*self._trained.values(), *(v for o in self._optimizers.values() for v in variables_of(o))]

    def steps_taken(self) -> dict[int, int]:
        """The steps each optimizer took in this process: its step now less its step at its first update here."""
        from . import fingerprint

        return {
            key: now - first
            for key, first in self._first_steps.items()
            if first is not None
            and key in self._optimizers
            and (now := fingerprint.step_now(self._optimizers[key])) is not None
        }

    def reduced_bytes(self, steps: dict[int, int]) -> int:
        """What the steps all-reduced: each optimizer's steps times its dense gradients' bytes."""
        return sum(taken * self._gradient_bytes.get(key, 0) for key, taken in steps.items())


def variables_of(optimizer) -> list:
    if optimizer is None:
        return []
    found = getattr(optimizer, "variables", ())
    return list(found() if callable(found) else found)  # tf-keras's legacy optimizers have a method.

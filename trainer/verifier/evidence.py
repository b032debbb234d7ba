"""What a worker's identical state proves: that it holds what was trained, and that its gradients were reduced.

Identical bytes prove nothing about variables nobody compared, nor about a worker that applied its
own gradients: two workers fed the same data train identically without ever exchanging one. So a
passing worker must show, in its observer's records (trainer/verifier/observed.py):
- every variable an optimizer updated, or holds (its step, its slots), compared at its end, which
  the observer reaches holding them alive whatever the program freed (trainer/observer/points.py);
- an optimizer update at all: a program in which none was seen has shown no training;
- gradients that were all-reduced before they were applied: by the optimizer inside
  `strategy.run`, or by the program itself, a collective before every gradient
  (trainer/observer/updates.py). Applied eagerly outside `strategy.run`, that cannot be read, and
  the traffic cannot stand in for it (any other collective, a metric's, meets its floor): not proven.
Records written before the observer knew these (`trained` absent) are judged on what they compared.
"""

from trainer.verifier.observed import Session, State
from trainer.verifier.text import count, names


def evidence_problem(session: Session, *, several: bool) -> str | None:
    """Why this worker's state, however identical, is not proven; None when it is. `several`: a cluster
    of more than one worker, whose gradients must have been reduced."""
    problem = _state_problem(session)
    unknown = next((update for update in session.updates if update.get("reduced") == "unknown"), None)
    if problem is None and several and unknown is not None:
        problem = (
            f"its {unknown.get('optimizer')} applied gradients eagerly {unknown.get('context')}, where how they "
            "were reduced cannot be read (run the step in strategy.run, or as a tf.function)"
        )
    return problem


def _state_problem(session: Session) -> str | None:
    last = session.states[-1]
    if not any(state.compared for state in session.states):
        unread = f"; {count(last.unreadable, 'variable')} could not be read (a TF1-style graph's own)"
        return "no variable of its model was compared at any point" + (unread if last.unreadable else "")
    if last.trained is None:
        return None  # A record from before the observer knew what was trained: what was compared stands.
    if last.trained_unreadable:
        return (
            f"{last.trained_unreadable} of {len(last.trained) + last.trained_unreadable} trained variables could "
            f"not be read at {last.label} (a TF1-style graph's own): their state is unknown"
        )
    if not last.trained:
        return (
            "no optimizer applied an update, so nothing shows that it trained (variables a program assigns "
            "itself are not observed)"
        )
    compared = {v.name for v in last.compared}
    uncompared = [name for name in last.trained if name not in compared]
    if uncompared:
        return (
            f"{len(uncompared)} of {len(last.trained)} trained variables are not compared at {last.label} "
            f"(local to each worker): {names(uncompared)}"
        )
    return None


def gradients_problem(session: Session) -> str | None:
    """An optimizer that applied gradients no collective had reduced: each worker trained on its own."""
    unreduced = next((update for update in session.updates if update.get("reduced") == "no"), None)
    if unreduced is None:
        return None
    how = (
        "apply_gradients was told not to aggregate them"
        if unreduced.get("skipped")
        else f"apply_gradients ran {unreduced.get('context')}, where it reduces nothing"
    )
    return (
        f"its {unreduced.get('optimizer')} applied gradients that were never all-reduced: {how}, and no "
        "collective produced them: each worker trained on its own gradients"
    )


def gradients_line(observed: dict[str, list[Session]]) -> str | None:
    """How every worker's gradients were reduced, for a passing run's proof; None for older records."""
    updates = [update for sessions in observed.values() for update in sessions[-1].updates]
    if not updates:
        return None
    ways = {update.get("reduced") for update in updates}
    optimizers = ", ".join(sorted({str(update.get("optimizer")) for update in updates}))
    if ways == {"optimizer"}:
        replicas = max(int(update.get("replicas") or 0) for update in updates)
        return f"gradients: all-reduced by every worker's {optimizers} inside strategy.run, {replicas} replicas"
    return f"gradients: all-reduced before every worker's {optimizers} applied them (a collective precedes each)"


def trained_part(last: State, *, at: bool) -> str:
    """How many of the trained variables the last point compared (all of them, or the run is not proven),
    `at` that point, when the line names several."""
    if not last.trained:
        return ""  # A record from before the observer knew (and none trained is no pass).
    total = len(last.trained)
    return f"{total} of {total} trained variables" + (f" at {last.label}; " if at else "; ")

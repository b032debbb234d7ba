"""A run's end as data: the `Run` that `Cluster.run()` returns, and each `Worker` of its verdict.

Standard library only, and nothing of `trainer`: the pytest plugin (tfcluster/installed/plugin.py)
rebuilds a `Run` in your test's process, where a `trainer` package of your own may be the one
on the path, from what the harness's own process wrote as JSON.
"""

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Worker:
    """One worker in the verdict: its status, its final metrics and what went wrong, if anything."""

    name: str
    status: str
    metrics: dict
    problem: str | None


@dataclass(frozen=True)
class Run:
    """A run's end: the exit status (the verifier's, as scripts/run's), and the verdict as data."""

    status: int
    # Whether the cluster was brought up at all (a failed set-up never gets there).
    ran: bool
    # The verifier's record of its verdict (`scripts/verify --json`'s); None if it gave none.
    verdict: dict | None
    # Each worker's log, as `docker compose logs` gives it.
    logs: dict[str, str] = field(default_factory=dict)
    # The Compose project it ran as: Cluster(name=run.name).down() takes it down.
    name: str | None = None
    # Its report.html's path (tfcluster/report/), where one was written.
    report: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == 0

    @property
    def workers(self) -> dict[str, Worker]:
        found = (self.verdict or {}).get("workers", [])
        return {
            worker["name"]: Worker(worker["name"], worker["status"], worker.get("metrics") or {}, worker.get("problem"))
            for worker in found
        }

    @property
    def problems(self) -> list[str]:
        """What went wrong, one line each: the verdict's problems (each worker's, the differences
        between them), or, for a run that ended without a verdict, how it ended."""
        if self.verdict is not None:
            return list(self.verdict.get("problems", []))
        return (
            [] if self.passed else [f"the run ended with exit status {self.status} before the verifier gave a verdict"]
        )

    @property
    def proven(self) -> list[str]:
        """What the verifier proved of the workers' model states (its table's lines), if it passed."""
        return list(((self.verdict or {}).get("synchronization") or {}).get("proven") or [])

    @property
    def data(self) -> dict:
        """What each worker's input delivered, as the verifier judged it: `proven` (its `data:` line),
        `problems`, `observed` (False: not seen, None: not judged), `replicated` (shared, as
        TF_DATA_SHARDING=replicated allowed) and each worker's `examples`, `distinct`, `exact` and,
        where the run read its data again, `one_pass` (`steps`, `examples`: what was judged); empty
        for a verdict without it."""
        return dict((self.verdict or {}).get("data") or {})

    def verdict_lines(self) -> list[str]:
        """The verdict in the verifier's words: what it proved and that it passed, or FAIL with one
        line per problem (its table's lines, less the metrics' figures)."""
        if self.passed and self.proven:
            expected = (self.verdict or {}).get("expected_workers", len(self.workers))
            return [*self.proven, f"verdict: PASS: {len(self.workers)} of {expected} workers agree"]
        problems = self.problems or ["the verifier passed the run without comparing any model state"]
        return [f"verdict: FAIL: {len(problems)} problem(s)", *(f"  - {problem}" for problem in problems)]

    def assert_synchronized(self) -> None:
        """Fails (AssertionError) unless every worker finished and the verifier proved their model
        states identical; the message is the verdict's own lines."""
        __tracebackhide__ = True  # pytest shows the test's line, not this one.
        if not (self.passed and self.proven):
            where = f" (Compose project {self.name})" if self.name else ""
            lines = "\n".join(self.verdict_lines())
            what = "the workers did not train in sync" if self.ran else "the cluster never trained"
            page = f"\nreport: {self.report}" if self.report else ""
            raise AssertionError(f"{what}, exit status {self.status}{where}:\n{lines}{page}")

    def assert_data_sharded(self) -> None:
        """Fails (AssertionError) unless the verifier saw every worker's training input and proved it
        its own: no example read by two workers. A program that feeds its steps by hand, unseen, fails
        it, and so does one replicated as TF_DATA_SHARDING=replicated allowed; a run whose workers read
        the same examples unallowed fails `assert_synchronized()` too."""
        __tracebackhide__ = True
        data = self.data
        if not data.get("observed") or data.get("problems") or data.get("replicated"):
            said = data.get("problems") or [data.get("proven") or "the verdict has no data proof"]
            page = [f"report: {self.report}"] if self.report else []
            raise AssertionError("each worker's data was not proven its own:\n" + "\n".join([*said, *page]))

    def as_data(self) -> dict:
        """The run as JSON-able data; `Run(**data)` is the same run."""
        return asdict(self)

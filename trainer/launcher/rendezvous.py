"""The rendezvous: before any training, every worker compares what it was given with every peer.

TensorFlow notices neither a mismatched port, batch size, seed, checkpoint directory, user
setting, version of TensorFlow or of the code (it trains on silently, or fails in a collective
naming none of them) nor a peer that never starts (it waits for an hour). So each worker's
launcher serves a fingerprint of its configuration over HTTP on a side port, fetches every peer's,
and names every field that differs. The same endpoint then serves as a heartbeat while training
runs, and at the end tells the peers how this worker ended.
"""

import dataclasses
import http.client
import http.server
import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping

from trainer.contract.cluster import Cluster, host_of
from trainer.contract.settings import ENV_NAMES, TrainingSettings
from trainer.launcher.digests import Digest

# Seconds between the serving loop's looks at whether it is to stop (see Server.__init__).
SHUTDOWN_POLL = 0.05


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What must be identical on every worker, plus who this worker says it is.

    Besides the cluster and the TRAIN_* settings: the checkpoint directory (`TF_CHECKPOINT_DIR`,
    "" for none: with it on, the chief's saves and every worker's restore are collectives too; the
    TFCLUSTER_FAULT_* faults beside it are each worker's own, on purpose), TensorFlow's, Keras's
    and Python's variables that change the computation (where set, trainer/launcher/runtime.py),
    the user's own settings (`TFCLUSTER_USER_ENV`'s names, each with its value's digest here, None
    where unset), the versions of Python, TensorFlow and Keras, and digests of the image, the
    project's files (None without a project), the training command and the installed packages
    (trainer/launcher/digests.py), all computed at the edge (trainer/launcher/__main__.py).
    """

    workers: tuple[str, ...]
    index: int
    settings: dict
    user_settings: dict = dataclasses.field(default_factory=dict)
    project: Digest | None = None
    packages: Digest | None = None
    # None only in a record of a launcher that did not compare it (shown as "not reported").
    checkpoint_dir: str | None = ""
    variables: dict = dataclasses.field(default_factory=dict)
    versions: dict = dataclasses.field(default_factory=dict)
    image: Digest | None = None
    command: Digest | None = None

    @classmethod
    def of(
        cls,
        cluster: Cluster,
        settings: TrainingSettings,
        *,
        user_settings: Mapping[str, str | None] | None = None,
        project: Digest | None = None,
        packages: Digest | None = None,
        checkpoint_dir: str = "",
        variables: Mapping[str, str] | None = None,
        versions: Mapping[str, str | None] | None = None,
        image: Digest | None = None,
        command: Digest | None = None,
    ) -> "Fingerprint":
        # Only what changes the computation: the accuracy pass mark is each worker's own check.
        named = {ENV_NAMES[key]: value for key, value in dataclasses.asdict(settings).items() if key != "min_accuracy"}
        # The cluster's form too: a program on one worker given a `chief`, on another none, would
        # not agree on who the leader is.
        named["TF_CHIEF"] = int(cluster.chief)
        return cls(
            workers=cluster.workers,
            index=cluster.index,
            settings=named,
            user_settings=dict(user_settings or {}),
            project=project,
            packages=packages,
            checkpoint_dir=checkpoint_dir,
            variables=dict(variables or {}),
            versions=dict(versions or {}),
            image=image,
            command=command,
        )

    def to_record(self) -> dict:
        return {
            "workers": list(self.workers),
            "index": self.index,
            "settings": self.settings,
            "user_settings": self.user_settings,
            "project": self.project.to_record() if self.project else None,
            "packages": self.packages.to_record() if self.packages else None,
            "checkpoint_dir": self.checkpoint_dir,
            "variables": self.variables,
            "versions": self.versions,
            "image": self.image.to_record() if self.image else None,
            "command": self.command.to_record() if self.command else None,
        }

    @classmethod
    def from_record(cls, record: dict) -> "Fingerprint":
        return cls(
            workers=tuple(record["workers"]),
            index=record["index"],
            settings=record["settings"],
            # Every worker of a run runs the same launcher; a record without these comes from
            # another version, and then shows as having none, which differs from this worker's.
            user_settings=record.get("user_settings", {}),
            project=Digest.from_record(record.get("project")),
            packages=Digest.from_record(record.get("packages")),
            checkpoint_dir=record.get("checkpoint_dir"),
            variables=record.get("variables", {}),
            versions=record.get("versions", {}),
            image=Digest.from_record(record.get("image")),
            command=Digest.from_record(record.get("command")),
        )


def differences(mine: Fingerprint, theirs: Fingerprint, *, me: str, peer: str, expected_index: int) -> list[str]:
    """Every field on which a peer disagrees, one line each, naming both workers' values."""
    found = _cluster_differences(mine, theirs, me=me, peer=peer)
    if theirs.index != expected_index:
        found.append(
            f"{peer} says it is worker {theirs.index} (TF_TASK_INDEX), "
            f"but it is worker {expected_index} in the cluster list"
        )
    for key in sorted(set(mine.settings) | set(theirs.settings)):
        if mine.settings.get(key) != theirs.settings.get(key):
            found.append(f"{key} differs: {me} has {mine.settings.get(key)}, {peer} has {theirs.settings.get(key)}")
    if mine.checkpoint_dir != theirs.checkpoint_dir:
        ours, its = (_checkpoints(fingerprint.checkpoint_dir) for fingerprint in (mine, theirs))
        found.append(f"TF_CHECKPOINT_DIR differs: {me} has {ours}, {peer} has {its}")
    found += _named_differences(mine.variables, theirs.variables, me=me, peer=peer, absent="(unset)")
    for name in sorted(set(mine.user_settings) | set(theirs.user_settings)):
        # Compared as they are: two long values may look alike once cut short to be shown.
        ours, its = (fingerprint.user_settings.get(name, _NOT_LISTED) for fingerprint in (mine, theirs))
        if ours != its:
            found.append(f"user setting {name} differs: {me} has {_shown(ours)}, {peer} has {_shown(its)}")
    found += _named_differences(mine.versions, theirs.versions, me=me, peer=peer, absent=_NOT_REPORTED)
    return found + _code_differences(mine, theirs, me=me, peer=peer)


def _code_differences(mine: Fingerprint, theirs: Fingerprint, *, me: str, peer: str) -> list[str]:
    """The digests that differ: the image's, the project's, the command's and the packages'."""
    found = []
    if mine.image != theirs.image:
        ours, its = (fingerprint.image or _NOT_REPORTED for fingerprint in (mine, theirs))
        found.append(f"image differs: {me} has {ours}, {peer} has {its} (workers run different images)")
    if mine.project != theirs.project:
        ours, its = (fingerprint.project or "no project (no TFCLUSTER_PROJECT_DIR)" for fingerprint in (mine, theirs))
        found.append(f"project files differ: {me} has {ours}, {peer} has {its} (different code on the workers)")
    if mine.command != theirs.command:
        ours, its = (fingerprint.command or _NOT_REPORTED for fingerprint in (mine, theirs))
        found.append(
            f"training command differs: {me} has {ours}, {peer} has {its} "
            "(another command, or another version of a file it names)"
        )
    if mine.packages != theirs.packages:
        found.append(
            f"installed packages differ: {me} has {mine.packages or 'none listed'}, "
            f"{peer} has {theirs.packages or 'none listed'} (workers built from different images or requirements)"
        )
    return found


def _named_differences(mine: dict, theirs: dict, *, me: str, peer: str, absent: str) -> list[str]:
    """`NAME differs` for each name whose value differs: `absent` where a worker lacks the name."""
    found = []
    for name in [*mine, *(name for name in theirs if name not in mine)]:
        ours, its = (values.get(name, _ABSENT) for values in (mine, theirs))
        if ours != its:
            ours, its = (absent if value is _ABSENT else _shown(value, none="(not installed)") for value in (ours, its))
            found.append(f"{name} differs: {me} has {ours}, {peer} has {its}")
    return found


def _checkpoints(directory: str | None) -> str:
    if directory is None:
        return _NOT_REPORTED
    return _shown(directory) if directory else "(empty: no checkpoints)"


def _cluster_differences(mine: Fingerprint, theirs: Fingerprint, *, me: str, peer: str) -> list[str]:
    if len(mine.workers) != len(theirs.workers):
        return [f"worker count differs: {me} has {len(mine.workers)}, {peer} has {len(theirs.workers)}"]
    found = []
    for position, (ours, its) in enumerate(zip(mine.workers, theirs.workers, strict=True)):
        if host_of(ours) != host_of(its):
            found.append(f"worker {position}'s host differs: {me} has {host_of(ours)}, {peer} has {host_of(its)}")
        elif ours != its:
            found.append(f"port of {host_of(ours)} differs: {me} has {ours}, {peer} has {its}")
    return found


# Longer values are cut short in the one line that names a difference.
_SHOWN_LENGTH = 60
# The value of a user setting that a worker does not compare: its TFCLUSTER_USER_ENV lacks the name.
_NOT_LISTED = object()
# A name a worker's record lacks (a variable it has unset, a version it did not report).
_ABSENT = object()
# What a record of a launcher that compared less than this one shows in place of what it lacks.
_NOT_REPORTED = "(not reported: another version of the launcher)"


def _shown(value: object, *, none: str = "(unset)") -> str:
    """A value as a difference line shows it: plain when it is short, printable text; `none` for None."""
    if value is _NOT_LISTED:
        return "(not in its TFCLUSTER_USER_ENV)"
    if value is None:
        return none
    value = str(value)
    if value and value.isprintable() and value == value.strip() and len(value) <= _SHOWN_LENGTH:
        return value
    shown = repr(value)
    return shown if len(shown) <= _SHOWN_LENGTH else f"{shown[: _SHOWN_LENGTH - 3]}..."


def rendezvous_port(cluster: Cluster, position: int, base: int) -> int:
    """The side port of the worker at `position`: `base`, plus one per earlier worker on the same host.

    Workers on distinct hosts (containers) all use `base`; several processes on one host get
    consecutive ports, in cluster-list order.
    """
    host = host_of(cluster.workers[position])
    return base + sum(1 for address in cluster.workers[:position] if host_of(address) == host)


class Server:
    """Serves this worker's fingerprint and state (`GET /?from=INDEX`) while the launcher lives.

    It remembers which peers have fetched its current state, so that a worker that ends does not
    vanish before its peers have learned how it ended (see `wait_until_seen`).
    """

    def __init__(self, fingerprint: Fingerprint, port: int):
        self._state = "waiting"
        # This worker's health while it trains (trainer/launcher/health.py), read on every answer.
        self._health: Callable[[], dict] = dict
        self._seen_by: set[int] = set()
        self._changed = threading.Condition()
        record = fingerprint.to_record()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 2.0  # A frozen peer must not hold a handler, and so this worker's exit, for long.

            def do_GET(self):
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                state = server._state
                payload = json.dumps({"fingerprint": record, "state": state, "health": server._health()}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return  # The peer gave up waiting (this worker was slow: thrashing, say); it asks again.
                # Counted only once the whole answer is out: the peer has really seen this state.
                server._seen(query.get("from", [""])[0], state)

            def log_message(self, *arguments):
                pass  # One line per heartbeat would drown the training log.

        self._server = http.server.ThreadingHTTPServer(("", port), Handler)
        # Handler threads are joined on close, so no answer is cut off when the launcher exits.
        self._server.daemon_threads = False
        # Polled often: closing waits for the serving loop's next look, and the launcher's exit
        # for the close (socketserver's default, half a second, was most of a worker's ending).
        threading.Thread(target=self._server.serve_forever, args=(SHUTDOWN_POLL,), daemon=True).start()

    def serve_health(self, health: Callable[[], dict]) -> None:
        self._health = health

    def set_state(self, state: str) -> None:
        with self._changed:
            self._state = state
            # Having seen an earlier state tells a peer nothing of this one: above all, not how
            # this worker ended, which is what the peer needs to tell a finished worker from a lost one.
            self._seen_by.clear()

    def _seen(self, peer: str, state: str) -> None:
        with self._changed:
            if peer.isdigit() and state != "waiting" and state == self._state:
                self._seen_by.add(int(peer))
                self._changed.notify_all()

    def wait_until_seen(self, peers: set[int], timeout: float) -> bool:
        """Waits until every one of `peers` has fetched this worker's current state; False if not within `timeout`."""
        with self._changed:
            return self._changed.wait_for(lambda: peers <= self._seen_by, timeout)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# Peers are on the cluster network: never go through an HTTP proxy set in the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PeerUnavailable(Exception):
    """A peer's rendezvous endpoint did not answer; the message says how it failed."""


def fetch(host: str, port: int, *, me: int, timeout: float) -> tuple[Fingerprint, str, dict]:
    """A peer's fingerprint, state and health, or PeerUnavailable with a reason a person can act on.

    `me` is this worker's index, so the peer knows who has seen it.
    """
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise PeerUnavailable("name not resolvable") from None
    try:
        with _OPENER.open(f"http://{host}:{port}/?from={me}", timeout=timeout) as response:
            record = json.loads(response.read())
    except urllib.error.URLError as error:
        reason = error.reason
        if isinstance(reason, ConnectionRefusedError):
            raise PeerUnavailable("resolvable, not listening yet") from None
        if isinstance(reason, (TimeoutError, socket.timeout)):
            raise PeerUnavailable(f"resolvable, no answer within {timeout:.0f}s") from None
        raise PeerUnavailable(f"resolvable, unreachable: {reason}") from None
    except TimeoutError:
        raise PeerUnavailable(f"resolvable, no answer within {timeout:.0f}s") from None
    except (OSError, ValueError, http.client.HTTPException) as error:
        # Includes a peer that closed mid-answer because it was ending.
        raise PeerUnavailable(f"resolvable, unreachable: {error!r}") from None
    try:
        health = record.get("health")  # A launcher of an earlier version serves none.
        fingerprint = Fingerprint.from_record(record["fingerprint"])
        return fingerprint, record["state"], health if isinstance(health, dict) else {}
    except (KeyError, TypeError):
        raise PeerUnavailable(f"answered, but not as a tfcluster launcher: {record!r:.80}") from None

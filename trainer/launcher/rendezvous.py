"""The rendezvous: before any training, every worker compares what it was given with every peer.

TensorFlow notices neither a mismatched port, batch size or seed (it trains on silently) nor a
peer that never starts (it waits for an hour). So each worker's launcher serves a fingerprint of
its configuration over HTTP on a side port, fetches every peer's, and names the first field that
differs. The same endpoint then serves as a heartbeat while training runs.
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

from trainer.contract.cluster import Cluster, host_of
from trainer.contract.settings import ENV_NAMES, TrainingSettings


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What must be identical on every worker, plus who this worker says it is."""

    workers: tuple[str, ...]
    index: int
    settings: dict

    @classmethod
    def of(cls, cluster: Cluster, settings: TrainingSettings) -> "Fingerprint":
        # Only what changes the computation: the accuracy pass mark is each worker's own check.
        named = {ENV_NAMES[key]: value for key, value in dataclasses.asdict(settings).items() if key != "min_accuracy"}
        return cls(workers=cluster.workers, index=cluster.index, settings=named)

    def to_record(self) -> dict:
        return {"workers": list(self.workers), "index": self.index, "settings": self.settings}

    @classmethod
    def from_record(cls, record: dict) -> "Fingerprint":
        return cls(workers=tuple(record["workers"]), index=record["index"], settings=record["settings"])


def differences(mine: Fingerprint, theirs: Fingerprint, *, me: str, peer: str, expected_index: int) -> list[str]:
    """Every field on which a peer disagrees, each named with both workers' values."""
    found = []
    if len(mine.workers) != len(theirs.workers):
        found.append(f"worker count differs: {me} has {len(mine.workers)}, {peer} has {len(theirs.workers)}")
    elif mine.workers != theirs.workers:
        for position, (ours, its) in enumerate(zip(mine.workers, theirs.workers, strict=False)):
            if host_of(ours) != host_of(its):
                found.append(f"worker {position}'s host differs: {me} has {host_of(ours)}, {peer} has {host_of(its)}")
            elif ours != its:
                found.append(f"port of {host_of(ours)} differs: {me} has {ours}, {peer} has {its}")
    if theirs.index != expected_index:
        found.append(
            f"{peer} says it is worker {theirs.index} (TF_TASK_INDEX), "
            f"but it is worker {expected_index} in the cluster list"
        )
    for key in sorted(set(mine.settings) | set(theirs.settings)):
        if mine.settings.get(key) != theirs.settings.get(key):
            found.append(f"{key} differs: {me} has {mine.settings.get(key)}, {peer} has {theirs.settings.get(key)}")
    return found


def rendezvous_port(cluster: Cluster, position: int, base: int) -> int:
    """The side port of the worker at `position`: `base`, plus one per earlier worker on the same host.

    Workers on distinct hosts (containers) all use `base`; several processes on one host get
    consecutive ports, in cluster-list order.
    """
    host = host_of(cluster.workers[position])
    return base + sum(1 for address in cluster.workers[:position] if host_of(address) == host)


class Server:
    """Serves this worker's fingerprint and state (`GET /?from=INDEX`) while the launcher lives.

    It remembers which peers have seen it since it agreed to train, so that a worker whose program
    ends quickly does not vanish before a slower peer has confirmed it (see `wait_until_seen`).
    """

    def __init__(self, fingerprint: Fingerprint, port: int):
        self._state = "waiting"
        self._seen_by: set[int] = set()
        self._changed = threading.Condition()
        record = fingerprint.to_record()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 2.0  # A frozen peer must not hold a handler, and so this worker's exit, for long.

            def do_GET(self):
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                state = server._state
                payload = json.dumps({"fingerprint": record, "state": state}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
                # Counted only once the whole answer is out: the peer has really seen this state.
                server._seen(query.get("from", [""])[0], state)

            def log_message(self, *arguments):
                pass  # One line per heartbeat would drown the training log.

        self._server = http.server.ThreadingHTTPServer(("", port), Handler)
        # Handler threads are joined on close, so no answer is cut off when the launcher exits.
        self._server.daemon_threads = False
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def set_state(self, state: str) -> None:
        with self._changed:
            self._state = state
            if state == "waiting":
                self._seen_by.clear()

    def _seen(self, peer: str, state: str) -> None:
        with self._changed:
            if peer.isdigit() and state != "waiting" and state == self._state:
                self._seen_by.add(int(peer))
                self._changed.notify_all()

    def wait_until_seen(self, peers: set[int], timeout: float) -> bool:
        """Waits until every one of `peers` has fetched this worker's state since it agreed."""
        with self._changed:
            return self._changed.wait_for(lambda: peers <= self._seen_by, timeout)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# Peers are on the cluster network: never go through an HTTP proxy set in the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PeerUnavailable(Exception):
    """A peer's rendezvous endpoint did not answer; the message says how it failed."""


def fetch(host: str, port: int, *, me: int, timeout: float) -> tuple[Fingerprint, str]:
    """A peer's fingerprint and state, or PeerUnavailable with a reason a person can act on.

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
        return Fingerprint.from_record(record["fingerprint"]), record["state"]
    except (KeyError, TypeError):
        raise PeerUnavailable(f"answered, but not as a tfcluster launcher: {record!r:.80}") from None

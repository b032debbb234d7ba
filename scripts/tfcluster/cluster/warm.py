"""Warm workers (`scripts/run --warm`): the cluster stays up between runs, and every run is forked.

The first warm run brings up a Compose project of its own, NAME-warm (NAME: the run's project,
tfcluster by default), from the run's own Compose files plus .tfcluster/NAME-warm/compose.warm.yaml: each
worker's main process is a zygote that has imported TensorFlow (trainer/zygote/), the verifier's
an idle one. Every run then `docker exec`s each worker's launcher and the verifier in those
containers, with the environment and command that the run's Compose files give each service
(`docker compose config`, so that nothing of Compose's interpolation is redone here) and folders
of its own in the volumes; the launcher asks its zygote to fork the program. The rest is a run as
any other: the rendezvous, the watchdog, the verdict.

The warm cluster is keyed by everything of the run's Compose configuration but the services'
environments and commands (which each run passes itself), by the image's id, and by the folders
it mounts as the file system knows them: a run whose key differs (another project folder, or the
same one removed and made again, --workers, --dev, a rebuilt image) brings it up again, saying
why. Only one run uses a warm cluster at a time (a lock beside its files). `scripts/run --warm-down`
takes it down.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tfcluster import paths
from tfcluster.cluster import cancel, configcache
from tfcluster.cluster.compose import BASE_FILE, VERDICT_SERVICE, ComposeProject, exit_status
from tfcluster.report import evidence
from tfcluster.setup import images
from trainer.contract import verdict as records
from trainer.contract import zygote
from trainer.contract.exitcodes import ExitCode

# One per warm cluster (scripts/run --name gives another): .tfcluster/NAME-warm/compose.warm.yaml.
WARM_FILE = ".tfcluster/{name}/compose.warm.yaml"
SUFFIX = "-warm"
DEFAULT_NAME = "tfcluster"
LABEL = "tfcluster.warm"
RUNS = "runs"  # Each run's folder in the volumes (trainer/launcher/warm.py clears the others).
RESULTS = "/results"
# How long a worker may outlive the verdict (as `docker compose stop --timeout 5` for a cold run)
# before its container is stopped, and the warm worker with it.
OUTLIVE = 5.0
STOP_TIMEOUT = 10
# The verifier's container only waits to be exec'd into; it ends at once on `docker stop`.
IDLE = [
    "python",
    "-c",
    "import signal, sys; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); signal.pause()",
]
# The shaper's image has Debian's python3 and no `python`.
IDLE_SHAPER = ["python3", *IDLE[1:]]
ZYGOTE = ["python", "-P", "-m", "trainer.zygote"]
# How a network shaper (compose.network.yaml) is told from the other services.
SHAPER_LABEL = ("tfcluster.role", "shaper")


def say(line: str) -> None:
    print(f"run: {line}", file=sys.stderr, flush=True)


def project_name(environment: dict[str, str]) -> str:
    return (environment.get("COMPOSE_PROJECT_NAME") or DEFAULT_NAME) + SUFFIX


def render(workers: dict[str, dict[str, str]], key: str, shapers: list[str] = ()) -> str:
    """The warm file: each worker a zygote started with its key variables, the verifier and the
    network shapers (`shapers`, with --network) idle: each run execs them as it does the launchers."""
    lines = [
        "# Written by scripts/run --warm (tfcluster/cluster/warm.py) for its warm cluster: do not edit.",
        "services:",
    ]
    for name, key_variables in workers.items():
        lines += [
            f"  {name}:",
            f"    entrypoint: !override {json.dumps(ZYGOTE)}",
            "    command: !reset []",
            # Each run brings its own environment (docker exec); the zygote's is its key alone.
            f"    environment: !override {json.dumps(key_variables or {}, sort_keys=True)}",
            "    env_file: !reset []",
            f"    labels: [{json.dumps(f'{LABEL}={key}')}]",
        ]
    for name, idle in [(VERDICT_SERVICE, IDLE), *((shaper, IDLE_SHAPER) for shaper in shapers)]:
        lines += [
            f"  {name}:",
            f"    entrypoint: !override {json.dumps(idle)}",
            "    command: !reset []",
            f"    labels: [{json.dumps(f'{LABEL}={key}')}]",
        ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Service:
    """One service as a run execs it: its container, environment, command and working folder."""

    name: str
    container: str
    environment: dict[str, str]
    command: list[str]
    working_dir: str | None
    shaper: bool = False  # A network shaper's: exec'd with the run's results folder alone.


@dataclass
class Outcome:
    status: int
    verifier_lines: list[str] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    # Every service's output, each line after the host's time as it came (the run's report's).
    timed: dict[str, str] = field(default_factory=dict)


class WarmCluster:
    """The warm cluster of one run's Compose files and project name."""

    def __init__(self, environment: dict[str, str], worker_names: list[str], *, root: Path = paths.ROOT):
        self._environment = environment
        self._names = worker_names
        self._root = root
        self.name = project_name(environment)
        self._files = [file for file in environment["COMPOSE_FILE"].split(":") if file]
        self.warm_file = WARM_FILE.format(name=self.name)
        # Its files in the checkout: the warm file, the kept configuration, the lock.
        self._folder = root / Path(self.warm_file).parent

    def run(self, *, collects: bool) -> Outcome:
        """One run on the warm cluster, brought up (again) first if it is not current."""
        with self._locked():
            config = self._config()
            shapers = _shapers(config)
            images = [config["services"][name]["image"] for name in [self._names[0], *shapers]]
            containers = [_container(self.name, name) for name in [*self._names, VERDICT_SERVICE, *shapers]]
            # One question to the engine for the images and the containers both.
            found = _inspected([*images, *containers])
            missing = [name for name in images if _image_in(found, name) is None]
            if missing:
                say(f"the image {missing[0]} is not there")
                return Outcome(ExitCode.CONFIG_ERROR)
            image = _image_in(found, images[0])
            key = _key(config, image["Id"])
            reason = stale(key, containers, found)
            if reason:
                say(f"bringing the warm cluster {self.name} up ({reason})")
                started = time.monotonic()
                status = self._up(config, key)
                if status:
                    return Outcome(status)
                say(f"warm cluster {self.name} up in {time.monotonic() - started:.1f} s")
            services = self._services(config, image) + self._shaper_services(config, found)
            return _Exec(self, services, uuid.uuid4().hex[:12], collects=collects).run()

    def down(self) -> int:
        """Takes the warm cluster down: its containers, network and volumes, then its files in the
        checkout (.tfcluster/NAME-warm: the warm file, the kept configuration, the lock)."""
        # compose.yaml names every service a warm cluster has; --remove-orphans takes the rest.
        environment = {**self._environment, "COMPOSE_FILE": BASE_FILE, "COMPOSE_PROJECT_NAME": self.name}
        project = ComposeProject.from_environment(environment, cwd=self._root)
        result = project.compose("down", "--volumes", "--remove-orphans", "--timeout", "5")
        if result.returncode != 0:
            say(f"`docker compose -p {self.name} down` failed: {result.stderr.strip()}")
            return result.returncode
        # Only once the cluster is gone: its warm file is what a second `down` would still need.
        shutil.rmtree(self._folder, ignore_errors=True)
        return 0

    def stop(self) -> None:
        """Stops every container of the warm cluster: each zygote passes SIGTERM to its run's launcher."""
        self._compose().quietly("stop", "--timeout", str(STOP_TIMEOUT))

    @contextlib.contextmanager
    def _locked(self):
        path = self._folder / "lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                say(f"waiting for the other run on the warm cluster {self.name} to end")
                fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _compose(self, *, warm: bool = False) -> ComposeProject:
        """The run's Compose files as the warm project, with the warm file or without."""
        files = [*self._files, *([self.warm_file] if warm else [])]
        environment = {**self._environment, "COMPOSE_FILE": ":".join(files), "COMPOSE_PROJECT_NAME": self.name}
        return ComposeProject.from_environment(environment, cwd=self._root)

    def _config(self) -> dict:
        """The run's Compose configuration, as Compose resolves it with the run's environment: kept
        from the last run, unless something Compose reads has changed since (configcache.py)."""
        compose = self._compose()
        kept = self._folder / "config.json"
        return configcache.cached(
            kept,
            compose.environment,
            self._root,
            lambda: json.loads(compose.compose("config", "--format", "json", check=True).stdout),
        )

    def _up(self, config: dict, key: str) -> int | None:
        keys = {name: zygote.key_of(_environment_of(config["services"][name])) for name in self._names}
        path = self._root / self.warm_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(keys, key, _shapers(config)), encoding="utf-8")
        result = self._compose(warm=True).compose(
            "up", "--detach", "--remove-orphans", "--force-recreate", timeout=None
        )
        if result.returncode != 0:
            say(f"the warm cluster did not come up:\n{result.stderr.strip()}")
            return exit_status(result.returncode) or 1
        return None

    def _services(self, config: dict, image: dict) -> list[Service]:
        entrypoint = image["Config"].get("Entrypoint") or []
        services = []
        for name in [*self._names, VERDICT_SERVICE]:
            service = config["services"][name]
            command = service.get("command") or image["Config"].get("Cmd") or []
            services.append(
                Service(
                    name=name,
                    container=_container(self.name, name),
                    environment=_environment_of(service),
                    command=[*(service.get("entrypoint") or entrypoint), *command],
                    working_dir=service.get("working_dir"),
                )
            )
        return services

    def _shaper_services(self, config: dict, found: dict[str, dict]) -> list[Service]:
        """Each network shaper, exec'd for every run: it shapes its worker's links for that run
        and clears them when its worker's launcher ends (trainer/shaper/__main__.py)."""
        services = []
        for name in _shapers(config):
            service = config["services"][name]
            image = _image_in(found, service["image"])
            command = [*(image["Config"].get("Entrypoint") or []), *(service.get("command") or [])]
            services.append(
                Service(name, _container(self.name, name), _environment_of(service), command, None, shaper=True)
            )
        return services


def _shapers(config: dict) -> list[str]:
    label, value = SHAPER_LABEL
    return [name for name, service in config["services"].items() if (service.get("labels") or {}).get(label) == value]


class _Exec:
    """One run's `docker exec`s: every worker's launcher and the verifier, their output as Compose shows it."""

    def __init__(self, cluster: WarmCluster, services: list[Service], run_id: str, *, collects: bool):
        self._cluster = cluster
        self._services = services
        self._run_id = run_id
        self._collects = collects
        self._width = max(len(_shown(service.name)) for service in services)
        self._print_lock = threading.Lock()
        # Each service's lines as they came, with the host's time of each (the report's timeline).
        self._lines: dict[str, list[tuple[float, str]]] = {service.name: [] for service in services}
        self._processes: dict[str, subprocess.Popen] = {}

    def run(self) -> Outcome:
        results = f"{RESULTS}/{RUNS}/{self._run_id}"
        readers = []
        interrupted = None
        previous = {}

        def interrupt(signum, _frame):
            nonlocal interrupted
            if cancel.stopped_by(signum) and interrupted is None:
                interrupted = signum

        if threading.current_thread() is threading.main_thread():
            # Every signal a cold run stops on (SIGHUP too: a closed terminal, some CI runners).
            for signum in cancel.SIGNALS:
                previous[signum] = signal.signal(signum, interrupt)
        try:
            for service in self._services:
                process = self._start(service, results)
                self._processes[service.name] = process
                reader = threading.Thread(target=self._forward, args=(service.name, process), daemon=True)
                reader.start()
                readers.append(reader)
            verifier = self._processes[VERDICT_SERVICE]
            while verifier.poll() is None and interrupted is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    verifier.wait(timeout=0.2)  # A signal's handler cannot wait; the loop looks.
            stopped = interrupted is not None
            if stopped:
                say(f"received {cancel.described(interrupted)}: stopping the warm cluster {self._cluster.name}")
                self._cluster.stop()
                status = 128 + interrupted
            else:
                status = exit_status(verifier.returncode)
                self._let_workers_end()
            for reader in readers:  # With the handlers still the run's: a signal now is still seen.
                reader.join(timeout=5)
            if not stopped and interrupted is not None:
                # As a cold run's (api._cancelled_late): a cancelled CI job's step must not pass.
                said = cancel.described(interrupted)
                say(f"received {said} as the run ended: its verdict stands in the report, the run fails")
                status = 128 + interrupted
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return Outcome(
            status,
            verifier_lines=[line for _, line in self._lines[VERDICT_SERVICE]],
            logs={
                name: "".join(line for _, line in lines)
                for name, lines in self._lines.items()
                if name != VERDICT_SERVICE
            },
            timed={
                name: "".join(f"{evidence.stamp(when)} {line}" for when, line in lines)
                for name, lines in self._lines.items()
            },
        )

    def _start(self, service: Service, results: str) -> subprocess.Popen:
        environment = dict(service.environment)
        if service.shaper:
            environment["TF_RESULTS_DIR"] = results  # Where its worker's launcher publishes this run.
            command = service.command
        elif service.name != VERDICT_SERVICE:
            environment[zygote.WARM_VARIABLE] = "1"
            environment["TF_RESULTS_DIR"] = results
            if environment.get("TF_CHECKPOINT_DIR"):
                environment["TF_CHECKPOINT_DIR"] = (
                    f"{environment['TF_CHECKPOINT_DIR'].rstrip('/')}/{RUNS}/{self._run_id}"
                )
            command = service.command
        else:
            command = [*service.command[: service.command.index("--results") + 1], results]
        # Each variable by name alone, its value from the CLI's environment: not on a command line.
        # The CLI's own (DOCKER_*) cannot be passed so without redirecting the CLI itself.
        arguments, client = [], {name: value for name, value in os.environ.items() if not _program_only(name)}
        for name, value in environment.items():
            if name.startswith("DOCKER_"):
                arguments += ["--env", f"{name}={value}"]
            else:
                arguments += ["--env", name]
                client[name] = value
        if service.working_dir:
            arguments += ["--workdir", service.working_dir]
        return subprocess.Popen(
            ["docker", "exec", *arguments, service.container, *command],
            env=client,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # Ctrl-C is the run's to handle: it stops the containers' programs.
        )

    def _forward(self, name: str, process: subprocess.Popen) -> None:
        prefix = f"{_shown(name):<{self._width}}  | "
        stdout = cancel.Outliving(sys.stdout)  # `scripts/run --warm | head`: read on, for the verdict.
        for line in process.stdout:
            self._lines[name].append((time.time(), line))
            with self._print_lock:
                stdout.write(prefix + line)
                stdout.flush()
        process.wait()

    def _let_workers_end(self) -> None:
        deadline = time.monotonic() + OUTLIVE
        for service in self._services:
            process = self._processes[service.name]
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            if process.poll() is None:
                say(f"{service.name} outlived the verdict by {OUTLIVE:g} s: its warm container is stopped")
                subprocess.run(
                    ["docker", "stop", "--timeout", str(STOP_TIMEOUT), service.container],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                process.wait()


def verdict_of(outcome: Outcome) -> dict | None:
    return records.found_in(outcome.verifier_lines)


def _program_only(name: str) -> bool:
    """Variables of this process that are the program's business, not the docker CLI's."""
    return name.startswith(("COMPOSE_", "TFCLUSTER_", "TF_", "TRAIN_"))


def _environment_of(service: dict) -> dict[str, str]:
    return {name: value for name, value in (service.get("environment") or {}).items() if value is not None}


def _container(project: str, service: str) -> str:
    """Compose's name for a service's one container."""
    return f"{project}-{service}-1"


def _shown(service: str) -> str:
    """How Compose names a service's one container in its output (`worker-0-1  | `): a warm run's
    lines read as a cold run's, so that what reads one (a person, grep, a test) reads both."""
    return f"{service}-1"


def _inspected(names: list[str]) -> dict[str, dict]:
    """`docker inspect` of images and containers at once: each found by the names it answers to
    (a container by its name, an image by its id and its tags). Those not there are not in it."""
    inspected = subprocess.run(["docker", "inspect", *names], capture_output=True, text=True)
    found = {}
    for thing in json.loads(inspected.stdout or "[]"):
        if "Name" in thing:
            found[thing["Name"].lstrip("/")] = thing
        else:
            found.update({name: thing for name in [thing["Id"], *(thing.get("RepoTags") or [])]})
    return found


def _image_in(found: dict[str, dict], name: str) -> dict | None:
    """The image `name` (an id, NAME:TAG, or NAME for NAME:latest) among `found`, if it is there."""
    return found.get(name) or found.get(images.tagged(name))


def stale(key: str, containers: list[str], found: dict[str, dict]) -> str | None:
    """Why the warm cluster must be brought up (again), or None if it is current: each of its
    `containers` must be among `found`, running, with the label of `key`."""
    if not any(container in found for container in containers):
        return "none is up"
    for container in containers:
        state = found.get(container)
        if state is None:
            return f"{container} is missing"
        if (state["Config"].get("Labels") or {}).get(LABEL) != key:
            return "its configuration, image or mounted folders changed since it came up"
        if not state["State"].get("Running"):
            return f"{container} is not running"
    return None


def _mounted_folders(config: dict) -> dict[str, list[int] | None]:
    """Each bind mount's source as the file system knows it (device and inode): a container's
    mount holds the folder it was made from, so one removed and made again at the same path (a
    fresh clone, a copy) is another folder, which a warm cluster must be brought up again to see."""
    identities = {}
    for service in config["services"].values():
        for volume in service.get("volumes") or ():
            if isinstance(volume, dict) and volume.get("type") == "bind" and volume.get("source"):
                try:
                    found = os.stat(volume["source"])
                    identities[volume["source"]] = [found.st_dev, found.st_ino]
                except OSError:
                    identities[volume["source"]] = None
    return identities


def _key(config: dict, image_id: str) -> str:
    """What a warm cluster is made of: the configuration but each run's own part, and the image.

    Not the zygotes' keys either: a run with another key has its zygotes restart themselves.
    """
    services = {}
    for name, service in config["services"].items():
        services[name] = {
            field_name: value
            for field_name, value in service.items()
            if field_name not in ("environment", "command", "env_file")
        }
    whole = {"services": services, "volumes": config.get("volumes"), "networks": config.get("networks")}
    whole["mounted"] = _mounted_folders(config)
    digest = hashlib.sha256(json.dumps([whole, image_id, render({}, "")], sort_keys=True).encode())
    return digest.hexdigest()[:16]

"""One run, checked: what it is made of (the Compose files, the environment, the files it writes)
and the steps that carry it out, before anything is done.

`Plan.steps` is the one list of what a run does: `execute` runs it and the dry run prints it, so
the two cannot drift (tfcluster/cluster/steps.py).
"""

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from tfcluster import paths
from tfcluster.cluster import devmode, fragments, runs, scaling, slowdown, steps
from tfcluster.cluster.compose import BASE_FILE
from tfcluster.cluster.fragments import NETWORK_FILE
from tfcluster.errors import Refusal
from tfcluster.project import envfiles
from tfcluster.project.options import Project
from trainer.contract.faults import VARIABLE as FAULTS
from trainer.contract.faults import parse as parse_faults
from trainer.contract.links import VARIABLE as LINKS
from trainer.contract.links import parse as parse_links
from trainer.contract.shaping import PROFILE_NAMES

PROFILES = PROFILE_NAMES
OWN_TRAINER_FILE = fragments.OWN_TRAINER.file
PROJECT_FILE = fragments.PROJECT.file
BAKED_FILE = fragments.BAKED.file
DATA_FILE = fragments.DATA.file
# Rendered for --workers N into the run's folder (tfcluster/cluster/runs.py); scripts/workers.py
# writes it at the root for `docker compose` by hand.
WORKERS_FILE = "compose.workers.yaml"
RECOVERY_FILE = fragments.RECOVERY_FILE
# Your program's environment, written for compose.project.yaml's env_file, in the run's folder
# (git ignores .tfcluster/).
ENV_FILE = "env"


@dataclass(frozen=True)
class Plan:
    """One run, checked: what it is made of, before anything is done."""

    worker_count: int
    recover: bool
    profile: str | None
    # Absolute, since Compose resolves a relative one from the project, not from where the user is.
    trainer_script: str | None
    project: Project | None = None
    slowed: dict[str, float] = field(default_factory=dict)  # --slow: each slowed worker's CPU limit, by name.
    dev: bool = False  # --dev: this checkout's trainer/ mounted over the image's.
    junit: str | None = None  # --junit: the verdict's JUnit XML (absolute: the run works from the root).
    # Whether the run reads the verdict back as data once it has ended (the Python API's Run does).
    collects: bool = False
    # The Compose project to run as: the one asked for (--name), or the default (COMPOSE_PROJECT_NAME,
    # else compose.yaml's name), which a run that finds it taken by another passes over for the
    # next free slot (tfcluster/cluster/runs.py).
    name: str = "tfcluster"
    name_given: bool = False
    # The run's folder of generated files, .tfcluster/runs/SLOT (the project's name, for a cold run).
    slot: str | None = None
    warm: bool = False  # --warm: on the warm cluster, brought up first if need be (tfcluster/cluster/warm.py).
    # --recover: the Docker socket's group, which the keeper is given instead of root (None: unknown).
    socket_gid: int | None = None
    # --chief: worker-0 is TF_CONFIG's `chief`, as TFJob writes it (TF_CHIEF=1).
    chief: bool = False
    faults: tuple[str, ...] = ()  # --fault: cuts timed by training progress (trainer/contract/faults.py).
    links: tuple[str, ...] = ()  # --link: links that differ from the profile (trainer/contract/links.py).
    report: str | None = None  # --report: the run's report.html's file (absolute), if given.

    @property
    def folder(self) -> str:
        """The run's own folder of generated files, from the root (tfcluster/cluster/runs.py)."""
        return runs.folder_of(self.slot or self.name)

    def generated(self, file: str) -> str:
        """A file the run writes, by its name in the run's folder, from the root."""
        return f"{self.folder}/{file}"

    @property
    def names(self) -> list[str]:
        return scaling.worker_names(self.worker_count)

    @property
    def renders_workers(self) -> bool:
        return self.worker_count != scaling.DEFAULT_WORKERS

    @property
    def has_data(self) -> bool:
        return self.project is not None and self.project.data is not None

    @property
    def bakes(self) -> bool:
        return self.project is not None and self.project.bake is not None

    @property
    def steps(self) -> list:
        """What the run does, in order: the one list that `execute` runs and the dry run prints."""
        return steps.of(self)

    def override(self) -> str | None:
        """compose.workers.yaml's text, for a number of workers other than compose.yaml's."""
        if not self.renders_workers:
            return None
        return scaling.render(
            self.worker_count,
            own_trainer=self.trainer_script is not None,
            project=self.project is not None,
            baked=self.bakes,
            data=self.has_data,
            network=bool(self.profile),
        )

    @property
    def files(self) -> list[str]:
        # compose.workers.yaml brings your own trainer or project itself (an override cannot extend
        # a service of another override); with compose.yaml's two, compose.byo.yaml or
        # compose.project.yaml, or compose.baked.yaml (and compose.data.yaml) do.
        if self.renders_workers:
            files = [BASE_FILE, self.generated(WORKERS_FILE)]
        elif self.trainer_script:
            files = [BASE_FILE, OWN_TRAINER_FILE]
        elif self.project:
            project_file = BAKED_FILE if self.bakes else PROJECT_FILE
            files = [BASE_FILE, project_file, *([DATA_FILE] if self.has_data else [])]
        else:
            files = [BASE_FILE]
        optional = [
            (RECOVERY_FILE, self.recover),
            (NETWORK_FILE, self.profile),
            (self.generated(devmode.DEV_FILE), self.dev),
            # Last, so that its limits win over every file before it.
            (self.generated(slowdown.SLOW_FILE), self.slowed),
        ]
        return files + [name for name, wanted in optional if wanted]

    def bind_sources(self) -> dict[str, str]:
        """What the workers get bind-mounted from this machine, by the option or variable that names it."""
        sources = {}
        if self.trainer_script:
            sources["TRAINER_SCRIPT"] = self.trainer_script
        if self.project and not self.bakes:
            sources["--project"] = self.project.directory
        if self.project and self.project.data:
            sources["--data"] = self.project.data
        if self.dev:
            sources["--dev"] = str(paths.ROOT / "trainer")
        return sources

    def written(self) -> dict[str, str | None]:
        """The files a run writes before its set-up, by path from the root, and their text."""
        return {
            self.generated(WORKERS_FILE): self.override(),
            self.generated(ENV_FILE): envfiles.env_file_text(self.project.variables) if self.project else None,
            self.generated(slowdown.SLOW_FILE): slowdown.render(self.slowed) if self.slowed else None,
            self.generated(devmode.DEV_FILE): devmode.render(devmode.services(self.names, self.recover), paths.ROOT)
            if self.dev
            else None,
        }

    def setup_options(self) -> list[str]:
        """scripts/setup builds the network shaper's image only for a run with a network profile, and
        in development mode does not rebuild the trainer image for its code alone."""
        options = [*(["--shaper"] if self.profile else []), *(["--dev"] if self.dev else [])]
        # The id of the image it found current, which the run then gives Compose (tfcluster/cluster/steps.py).
        return [*options, "--image-id-file", self.generated(steps.IMAGE_ID_FILE)]

    def environment(self, baked_image: str | None = None) -> dict[str, str]:
        """What the set-up and Compose get on top of the user's environment.

        With --bake, `baked_image` is the image's name once it is known (after the set-up, unless
        --tag gave it).
        """
        # Set in every case, so that a COMPOSE_FILE exported for an earlier cluster is not what runs.
        # And the project's name, so that no other run's is what Compose is given.
        environment = {"COMPOSE_FILE": ":".join(self.files), "COMPOSE_PROJECT_NAME": self.name}
        if self.trainer_script:
            environment["TRAINER_SCRIPT"] = self.trainer_script
        if self.project:
            environment |= _project_environment(self.project, baked_image, paths.ROOT / self.generated(ENV_FILE))
        if self.profile:
            environment["TF_NETWORK_PROFILE"] = self.profile
            # Set even when empty: none from an earlier shell.
            environment |= {FAULTS: "; ".join(self.faults), LINKS: "; ".join(self.links)}
        if self.chief:
            environment["TF_CHIEF"] = "1"
        if self.recover and self.socket_gid is not None:
            # The keeper as the workers' user, with the one group that opens the socket (compose.recovery.yaml).
            environment |= {"TFCLUSTER_KEEPER_USER": "1000:1000", "DOCKER_SOCKET_GID": str(self.socket_gid)}
        return environment


def _project_environment(project: Project, baked_image: str | None, env_file: os.PathLike) -> dict[str, str]:
    environment = {}
    if project.bake is not None:
        # No TFCLUSTER_PROJECT: nothing is mounted, so no host folder is named at all. The
        # image's name, when it is not yet known, matters to nothing before `docker build`.
        if baked_image or project.tag:
            environment["TFCLUSTER_BAKED_IMAGE"] = baked_image or project.tag
    else:
        environment["TFCLUSTER_PROJECT"] = project.directory
    # Compose splits it again, as a shell would; joined by shlex, every word survives that.
    environment["TFCLUSTER_COMMAND"] = shlex.join(project.command)
    environment["TFCLUSTER_ENV_FILE"] = str(env_file)
    if project.data:
        environment["TFCLUSTER_DATA"] = project.data
    if project.requirements:
        environment["EXTRA_REQUIREMENTS"] = " ".join(project.requirements)
    if project.image:
        environment["TFCLUSTER_IMAGE"] = project.image
    return environment


def check_network(workers: int, network: str | None, faults=(), links=()) -> tuple[tuple[str, ...], ...]:
    """A network profile, and what it cannot go with; its faults' and links' clauses, each checked.
    Raises Refusal."""
    if network is not None and network not in PROFILES:
        raise Refusal(f"--network {network!r} is not a profile: {', '.join(PROFILES)}")
    if network and workers < 2:
        raise Refusal(f"--network shapes the links between workers: not with --workers {workers}")
    names = scaling.worker_names(workers)
    faults = _clauses(
        "fault",
        faults,
        network,
        lambda clause: parse_faults(clause, names),
        "cut worker-1 at step 8 for 5s",
        "the shapers cut and heal; --network lan shapes nothing else",
    )
    links = _clauses(
        "link",
        links,
        network,
        lambda clause: parse_links(clause, PROFILES, names),
        "worker-0,worker-1 <-> worker-2,worker-3: wan",
        "the profile of every other link; lan shapes nothing",
    )
    return faults, links


def _clauses(option: str, clauses, network: str | None, parse, example: str, why: str) -> tuple[str, ...]:
    """--fault's or --link's clauses (the API's `faults`, `links`), each checked by `parse`; raises Refusal."""
    if isinstance(clauses, str):
        raise Refusal(f"{option}s={clauses!r}: a list of clauses, such as [{example!r}]")
    clauses = tuple(clauses)
    if clauses and not network:
        raise Refusal(f"--{option} goes with --network ({why})")
    for clause in clauses:
        try:
            parse(clause)
        except ValueError as error:
            raise Refusal(f"--{option} {str(error).split(': ', 1)[1]}") from None
    return clauses


def check_warm(warm: bool, recover: bool) -> None:
    """What warm workers cannot go with; raises Refusal."""
    if warm and recover:
        raise Refusal(
            "--warm and --recover do not go together (the keeper restarts containers, which a warm run keeps)"
        )


def check_tag(tag: str | None, bake: bool) -> None:
    if tag is not None and not bake:
        raise Refusal("--tag goes with --bake (the name of the image it builds)")


def trainer_script_of(environ: Mapping[str, str], has_project: bool) -> str | None:
    """TRAINER_SCRIPT, checked and made absolute (from where the user is); raises Refusal."""
    trainer_script = environ.get("TRAINER_SCRIPT") or None
    if not trainer_script:
        return None
    if has_project:
        raise Refusal(
            "--project and TRAINER_SCRIPT do not go together (TRAINER_SCRIPT is the one-file form of --project)"
        )
    # From where the user is, not from the project, which Compose resolves paths from.
    if not os.path.isfile(trainer_script):
        raise Refusal(f"TRAINER_SCRIPT {trainer_script!r} is not a file")
    return os.path.realpath(trainer_script)


def output_path(given: str | None, *, option: str = "--junit", example: str = "verdict.xml") -> str | None:
    """A file the run writes (--junit's, --report's), absolute, checked now so that a report that
    cannot be written costs no run."""
    if not given:
        return None
    path = os.path.abspath(given)
    if os.path.isdir(path):
        raise Refusal(f"{option} {given} is a folder; give a file name, such as {example}")
    folder = os.path.dirname(path)
    # Its folder is made if missing: it, or its nearest existing ancestor, must be writable.
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not (os.path.isdir(existing) and os.access(existing, os.W_OK)):
        raise Refusal(f"{option} {given}: {folder} cannot be made or written")
    return path

"""Your project as a run takes it (--project and the options that go with it), checked into a `Project`.

Everything is checked on the host before anything starts, so that a mistake costs nothing: the
folder, the command (does its script or module exist?), the variables (no name the harness owns,
nothing Compose's env file cannot hold), the requirements (held to the image's pins) and, with
--bake, what the image will hold. A mistake is a `Refusal`.
"""

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tfcluster.errors import Refusal
from tfcluster.project import access, baking, envfiles, layout, program, requirements


@dataclass(frozen=True)
class ProjectOptions:
    """What was asked for, as given: paths from where the user is, variables as NAME=VALUE texts."""

    directory: str
    command: str | None = None
    data: str | None = None
    env: tuple[str, ...] = ()
    env_files: tuple[str, ...] = ()
    requirements: str | None = None
    bake: bool = False
    tag: str | None = None

    def arguments(self) -> tuple[str, ...]:
        """The options that ask for this project, in the order of scripts/run --help."""
        options = ["--project", self.directory]
        options += ["--command", self.command] if self.command is not None else []
        options += ["--data", self.data] if self.data is not None else []
        for text in self.env:
            options += ["--env", text]
        for path in self.env_files:
            options += ["--env-file", path]
        options += ["--requirements", self.requirements] if self.requirements is not None else []
        options += ["--bake"] if self.bake else []
        options += ["--tag", self.tag] if self.tag is not None else []
        return tuple(options)


@dataclass(frozen=True)
class Project:
    """Your training project (--project), checked: what every worker gets of it."""

    # The options as given, for the dry run's first line.
    arguments: tuple[str, ...]
    # Absolute, since Compose resolves a relative one from its project, not from where the user is.
    directory: str
    command: tuple[str, ...]
    data: str | None
    # Yours, merged: the env files in order, then --env.
    variables: dict[str, str]
    # Normalized specifiers, and the file they come from.
    requirements: tuple[str, ...]
    requirements_file: str | None
    # The image to build and run, when it is this script's to choose (your requirements' own).
    image: str | None
    # With --bake: what goes into the baked image, and its name if you gave one (--tag).
    bake: baking.BakeContext | None = None
    tag: str | None = None


def assignments(env: Mapping[str, str] | Sequence[str]) -> tuple[str, ...]:
    """--env's NAME=VALUE texts, from a mapping (the Python API's form) or as they are."""
    if isinstance(env, Mapping):
        return tuple(f"{name}={value}" for name, value in env.items())
    return tuple(env)


def check(options: ProjectOptions, environ: Mapping[str, str]) -> Project:
    """Your project, checked on the host as far as it can be; raises Refusal."""
    shown = options.directory
    if not os.path.isdir(shown):
        raise Refusal(f"--project {shown!r} is not a folder")
    directory = os.path.realpath(shown)
    if not options.bake:  # Baked, every file is made readable to all (tfcluster/project/baking.py).
        access.check_readable("--project", directory)
    data = None
    if options.data is not None:
        if not os.path.isdir(options.data):
            raise Refusal(f"--data {options.data!r} is not a folder")
        data = os.path.realpath(options.data)
        access.check_readable("--data", data)
    command = _command(options, directory, data)
    variables = envfiles.merge(
        *(envfiles.parse_env_file(path, environ) for path in options.env_files),
        [envfiles.parse_assignment(text) for text in options.env],
    )
    # Checked now, so that a value Compose's env file cannot hold is refused before anything is done.
    envfiles.env_file_text(variables)
    requirements_file, specifiers = _requirements(options, environ)
    image = None
    if specifiers and not environ.get("TFCLUSTER_IMAGE"):
        image = requirements.image_tag(specifiers)
    bake = _bake(options, directory, data, command, image or environ.get("TFCLUSTER_IMAGE") or layout.DEFAULT_IMAGE)
    return Project(
        arguments=options.arguments(),
        directory=directory,
        command=tuple(command),
        data=data,
        variables=variables,
        requirements=tuple(specifiers),
        requirements_file=requirements_file and os.path.realpath(requirements_file),
        image=image,
        bake=bake,
        tag=options.tag,
    )


def _command(options: ProjectOptions, directory: str, data: str | None) -> list[str]:
    if options.command is None:
        script = os.path.join(directory, layout.DEFAULT_SCRIPT)
        if not os.path.isfile(script):
            raise Refusal(f"--project {options.directory!r} has no {layout.DEFAULT_SCRIPT}: give --command")
        if not options.bake:
            access.check_readable("--project", directory, script)
        return list(layout.DEFAULT_COMMAND)
    command = program.split_command(options.command)
    program.check_command(command, program.Mounts(directory, data, bakes=options.bake))
    return command


def _requirements(options: ProjectOptions, environ: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """The requirements file (given, or the project's own) and its specifiers."""
    requirements_file = options.requirements
    default = os.path.join(options.directory, layout.REQUIREMENTS_FILE)
    if requirements_file is None and os.path.isfile(default):
        requirements_file = default
    specifiers: list[str] = []
    if requirements_file is not None:
        if options.requirements is not None and not os.path.isfile(requirements_file):
            raise Refusal(f"--requirements {requirements_file!r} is not a file")
        specifiers, provided = requirements.parse_requirements(requirements_file)
        if provided:
            # Said, not silent: the project asked for them, and gets the image's own.
            print(
                f"run | {requirements_file}: {', '.join(provided)}: the image's own, not installed again",
                file=sys.stderr,
            )
    if specifiers and environ.get("EXTRA_REQUIREMENTS"):
        raise Refusal(
            f"EXTRA_REQUIREMENTS and {requirements_file} do not go together: list every requirement in the file"
        )
    return requirements_file, specifiers


def _bake(
    options: ProjectOptions, directory: str, data: str | None, command: list[str], base: str
) -> baking.BakeContext | None:
    if not options.bake:
        return None
    if options.tag is not None:
        baking.check_tag(options.tag, base)
    bake = baking.bake_context(directory, data)
    # Again, now that it is known which files the image will hold: one the command needs may
    # be left out (by the project's .dockerignore, say), and a worker would not find it.
    program.check_command(command, program.Mounts(directory, data, baked=bake.files))
    return bake

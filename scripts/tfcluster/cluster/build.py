"""--bake's image: docker build of docker/Dockerfile.project, its context written as it is read.

The context itself (what is sent, its digest, the tag) is your project's (tfcluster/project/baking.py);
this is what is done with Docker: build it, and remove the folder's images it supersedes.
"""

import contextlib
import subprocess
import sys
import tempfile
from pathlib import Path

from tfcluster.cluster import cancel, composefiles
from tfcluster.cluster.compose import exit_status
from tfcluster.project import baking
from tfcluster.project.options import Project
from trainer.contract.exitcodes import ExitCode

DOCKERFILE = "docker/Dockerfile.project"
REPOSITORY = baking.BAKED_REPOSITORY
# docker/Dockerfile.project's label, which tells a baked image from the harness's own.
BAKED_TITLE = "org.opencontainers.image.title=tfcluster-baked"
# What the dry run shows for the baked image's name before the set-up has built the image it is
# named after (with --tag, the name itself).
UNKNOWN_TAG = f"{REPOSITORY}:HASH"


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


def bake(project: Project, environment: dict[str, str], root: Path) -> tuple[str | None, int]:
    """Builds the baked image: (its name, 0), or (None, the status to exit with) once said why.

    The base image is the one the set-up has just built, so its id is known now, and with it the
    default name. The context is written to `docker build -`'s standard input as it is read.
    """
    base = composefiles.base_image({**composefiles.dotenv(root / ".env"), **environment})
    dockerfile = (root / DOCKERFILE).read_text(encoding="utf-8")
    tag = project.tag
    if tag is None:
        inspect = ["docker", "image", "inspect", "--format", "{{.Id}}", base]
        inspected = subprocess.run(inspect, cwd=root, env=environment, capture_output=True, text=True)
        if inspected.returncode != 0:
            print(f"run: --bake: no image {base} to build on: {last_line(inspected.stderr)}", file=sys.stderr)
            return None, exit_status(inspected.returncode)
        digest = baking.context_digest(project.bake, dockerfile, inspected.stdout.strip())
        tag = baking.baked_tag(digest)
    print(f"run | baking {project.directory} ({project.bake.summary()}) into {tag}, on {base}", file=sys.stderr)
    command = build_command(tag, base, project.directory)
    # The legacy builder's notice that it is deprecated goes to stderr on every build: kept aside,
    # and shown only with the error of a build that failed.
    with tempfile.TemporaryFile() as errors:
        # A group of its own, as every child of a run that does its work (tfcluster/cluster/cancel.py).
        build = subprocess.Popen(
            command,
            cwd=root,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            process_group=0,
        )
        try:
            try:
                baking.write_context(project.bake, dockerfile, build.stdin)
            except BrokenPipeError:
                pass  # Docker stopped reading: its status and message say why.
            except OSError as error:
                # A file of the project that could not be read after all (gone or changed since the check).
                build.kill()
                build.wait()
                print(f"run: --bake: {error.filename or project.directory}: {error.strerror or error}", file=sys.stderr)
                return None, ExitCode.CONFIG_ERROR
            finally:
                with contextlib.suppress(BrokenPipeError):
                    build.stdin.close()
            status = build.wait()
        except BaseException:  # Cancelled: the build goes with the run.
            with cancel.shielded():
                cancel.stop(build, cancel.GRACE)
            raise
        if status != 0:
            errors.seek(0)
            sys.stderr.write(errors.read().decode(errors="replace"))
            print(f"run: --bake: docker build of {tag} failed (exit status {status})", file=sys.stderr)
            return None, exit_status(status)
    return tag, 0


def build_command(tag: str, base: str, directory: str) -> list[str]:
    """`docker build`, reading the context (with the Dockerfile in it) from standard input."""
    label = f"{baking.FOLDER_LABEL}={baking.folder_label(directory)}"
    return [
        *("docker", "build", "--quiet", "--file", baking.CONTEXT_DOCKERFILE, "--tag", tag),
        *("--build-arg", f"TFCLUSTER_IMAGE={base}", "--label", label, "-"),
    ]


def remove_superseded(project: Project, current: str, environment: dict[str, str], root: Path) -> None:
    """Removes the same folder's earlier baked images, by their default names only (never a --tag's),
    and any baked image that a rebuild left without a name.

    Each change to the project names a new image; without this they would pile up. A name is
    removed, not an image, so that one also tagged for a registry stays; one still used by a
    container (another Compose project's, say) stays as well.
    """
    if project.tag is None:
        label = f"label={baking.FOLDER_LABEL}={baking.folder_label(project.directory)}"
        listed = subprocess.run(
            ["docker", "image", "ls", "--filter", label, "--format", "{{.Repository}}:{{.Tag}}"],
            cwd=root,
            env=environment,
            capture_output=True,
            text=True,
        )
        repository = REPOSITORY + ":"
        superseded = [name for name in listed.stdout.split() if name.startswith(repository) and name != current]
        if listed.returncode == 0 and superseded:
            subprocess.run(
                ["docker", "image", "rm", *superseded],
                cwd=root,
                env=environment,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
    # A --tag used again leaves its earlier image nameless ("dangling"): only those go.
    subprocess.run(
        ["docker", "image", "prune", "--force", "--filter", f"label={BAKED_TITLE}"],
        cwd=root,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

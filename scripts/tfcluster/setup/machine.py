"""The set-up's steps in order. On a new machine Compose, the base images and the wheels are three
downloads, one of them a build, that need nothing of each other: they run at once, and the images'
build waits for all three. The first to fail ends the others (children.py)."""

import dataclasses
import shutil
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

from tfcluster.setup import bases, compose, images, wheelhouse
from tfcluster.setup.children import Children
from tfcluster.setup.messages import SetupError

ENV_FILE = Path(".env")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    shaper: bool = False  # The network shaper's base image and image too.
    dev: bool = False  # The trainer image is current when all but its code is.
    image_id_file: Path | None = None
    image: str = images.TRAINER  # TFCLUSTER_IMAGE
    extra: str = ""  # EXTRA_REQUIREMENTS


def set_up(options: Options, environ: dict[str, str], children: Children) -> None:
    """Everything in place, from the checkout's root (the working directory). Raises SetupError
    for what the user must fix, CommandFailed for a command that failed and said why."""
    if shutil.which("docker") is None:
        raise SetupError("docker is not installed; install Docker Engine first")
    trainer_base, shaper_base = at_once(
        children,
        lambda: compose.ensure(children, environ),  # The client's plugin: no engine needed.
        lambda: _bases(children, options.shaper),
        lambda: _wheels(children, options.extra),
    )[1]
    bases.remember(ENV_FILE, bases.TRAINER.variable, trainer_base[0])
    wanted = [images.trainer(base=trainer_base, image=options.image, extra=options.extra, dev=options.dev)]
    if shaper_base:
        bases.remember(ENV_FILE, bases.SHAPER.variable, shaper_base[0])
        wanted.append(images.shaper(base=shaper_base))
    found = images.labelled(children, wanted)
    stale = [image for image in wanted if found.get(image.image, ("", None))[1] != image.digest]
    if stale:
        images.build(children, stale, environ, extra=options.extra)
        found = images.labelled(children, wanted[:1])
    if options.image_id_file:
        images.record_id(wanted[0], found.get(wanted[0].image), options.image_id_file)


def _bases(children: Children, shaper: bool) -> tuple[tuple[str, str], tuple[str, str] | None]:
    """Each base image's name and id: the trainer's, and with `shaper` the shaper's."""
    # The engine first: without it no image is here, and none can be pulled or built.
    if not children.succeeds(["docker", "version", "--format", "{{.Server.Version}}"]):
        raise SetupError("the Docker engine is not running (docker version could not reach it)")
    # One after the other: both may need mmdebstrap installed, and apt allows one install at a time.
    trainer, trainer_id, superseded = bases.choose(bases.TRAINER, children, also=(bases.SUPERSEDED,))
    if superseded:
        children.succeeds(["docker", "image", "rm", bases.SUPERSEDED])
    if not shaper:
        return (trainer, trainer_id), None
    return (trainer, trainer_id), bases.choose(bases.SHAPER, children)[:2]


def _wheels(children: Children, extra: str) -> None:
    wheelhouse.ensure_pinned(children)
    wheelhouse.ensure_extra(children, extra)


def at_once(children: Children, *steps: Callable[[], object]) -> list[object]:
    """The results of `steps`, run in threads at once. The first to raise stops every command the
    others run, and its exception is raised; so is one in this thread (a signal's)."""
    with ThreadPoolExecutor(len(steps)) as pool:
        futures = [pool.submit(step) for step in steps]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                if future.done() and future.exception() is not None:
                    raise future.exception()
        except BaseException:
            children.stop()
            raise
        return [future.result() for future in futures]

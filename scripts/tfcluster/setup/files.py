"""A file the set-up and the runs keep (.env, stamps, a kept configuration, the pins), replaced
whole or not at all: written beside itself, then renamed over it (a rename within one file system
is atomic), so a crash or a concurrent reader never sees half of it."""

from pathlib import Path


def replace_whole(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)

"""Compose files read with PyYAML, for tests: anchors and `<<` merges resolved, Compose's tags kept."""

import dataclasses

import yaml


@dataclasses.dataclass(frozen=True)
class Tag:
    """Compose's `!reset` or `!override` and its value (a list as a tuple, to compare)."""

    tag: str
    value: object


class Loader(yaml.SafeLoader):
    pass


def _tagged(loader: yaml.SafeLoader, node: yaml.Node) -> Tag:
    if isinstance(node, yaml.SequenceNode):
        return Tag(node.tag, tuple(loader.construct_sequence(node)))
    return Tag(node.tag, loader.construct_scalar(node) if node.value else None)


for _name in ("!reset", "!override"):
    Loader.add_constructor(_name, _tagged)


def load(text: str) -> dict:
    return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader with two tags added)

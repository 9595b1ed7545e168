"""YAML in which no mapping repeats a key: every YAML file Cairn reads (the policy's roles, the
factor files, the labelled questions).

PyYAML keeps the last of two equal keys, so a roles file naming ``staff`` twice, or one role's
``sensitivity_ceiling`` twice, would quietly load whichever came last while a reviewer reading
the file may see the first. As with JSON (``cairn.schema.unique_json``), a repeat is refused at
any depth, naming the file, the line and column of the repeat, and the key; nothing is loaded.
A merge key (``<<``) may still override what it merges: that is what it is for.

The text is scanned and parsed by libyaml (``yaml.CSafeLoader``, seven times faster than PyYAML's
own parser on the policy file, which every app and registry loads) when PyYAML was built with it;
the constructing, where repeats are found, is the same Python either way. libyaml's errors name the
file, line and column as PyYAML's do (a control character by its byte position instead), without
PyYAML's quoted source line and caret, and some say less (an undefined alias is not named).
"""

from __future__ import annotations

import io
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

try:
    from yaml import CSafeLoader as SafeLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader  # type: ignore[assignment]

MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKey(ConstructorError):
    """A mapping names one key twice; the message places the repeat (file, line, column)."""

    def __init__(self, key: Any, context_mark: yaml.Mark | None, problem_mark: yaml.Mark | None) -> None:
        shown = repr(key) if len(repr(key)) <= 64 else repr(key)[:64] + "..."
        super().__init__(
            "while constructing a mapping", context_mark, f"found duplicate key {shown}", problem_mark
        )
        self.key = key


class UniqueKeyLoader(SafeLoader):
    """``yaml.CSafeLoader`` (or ``SafeLoader``) refusing a mapping that repeats a key (``DuplicateKey``)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: the base class refuses it in its own words
                continue
            if repeated:
                raise DuplicateKey(key, node.start_mark, key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def loads(text: str, name: str) -> Any:
    """The one YAML document of ``text``, read as ``name`` (the file its errors name)."""
    # A stream's name is what every error's mark shows (a bare string shows "<unicode string>").
    stream = io.StringIO(text)
    stream.name = name
    loader = UniqueKeyLoader(stream)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_file(path: Path) -> Any:
    """The one YAML document of the UTF-8 file ``path``."""
    return loads(path.read_text(encoding="utf-8"), str(path))

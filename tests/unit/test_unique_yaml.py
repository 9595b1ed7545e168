"""Every YAML file Cairn reads refuses a mapping that repeats a key (review of stop 27).

PyYAML keeps the last of two equal keys: a roles file that lowered staff's ceiling and later, in
the same role, raised it again loaded staff at ``high`` while a reviewer reading the role's first
lines saw ``low``. The JSON side refused repeats (``unique_json``); now the YAML loaders do too
(``cairn.schema.unique_yaml``), naming the file, the line and the key, and load nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cairn.memory.factors.intents import LABELLED_QUESTIONS, load_labelled
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import REPO_ROOT
from cairn.schema.unique_yaml import DuplicateKey, UniqueKeyLoader, loads
from tests.yaml_repeats import repeat_after

ROLES = REPO_ROOT / "fixtures" / "policy" / "roles.yaml"


def test_a_repeat_is_refused_at_any_depth_naming_file_line_and_key() -> None:
    with pytest.raises(DuplicateKey) as caught:
        loads("a: 1\nb:\n  - {c: 1}\n  - c: 1\n    d: 2\n    c: 3\n", "probe.yaml")
    assert caught.value.key == "c"
    assert caught.value.problem_mark is not None and caught.value.problem_mark.line + 1 == 6
    assert 'in "probe.yaml", line 6, column 5' in str(caught.value)
    assert "found duplicate key 'c'" in str(caught.value)


def test_a_merge_key_may_still_override_what_it_merges() -> None:
    assert loads("x: &x {a: 1, b: 1}\ny:\n  <<: *x\n  a: 2\n", "probe.yaml") == {
        "x": {"a": 1, "b": 1},
        "y": {"a": 2, "b": 1},
    }


def test_a_roles_file_repeating_a_ceiling_is_refused(tmp_path: Path) -> None:
    path, line = repeat_after(
        ROLES,
        ROLES.read_text(encoding="utf-8"),
        "sensitivity_ceiling: low",
        "    sensitivity_ceiling: high",
        tmp_path,
    )
    with pytest.raises(DuplicateKey) as caught:
        PolicyRegistry.load(path)
    message = str(caught.value)
    assert f'in "{path}", line {line},' in message and "duplicate key 'sensitivity_ceiling'" in message


def test_the_labelled_questions_repeating_a_key_are_refused(tmp_path: Path) -> None:
    text = LABELLED_QUESTIONS.read_text(encoding="utf-8")
    path, line = repeat_after(LABELLED_QUESTIONS, text, "role: writer", "role: staff", tmp_path)
    with pytest.raises(DuplicateKey) as caught:
        load_labelled(path)
    assert f'in "{path}", line {line},' in str(caught.value) and "duplicate key 'role'" in str(caught.value)


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")
def test_libyaml_reads_the_text_and_errors_still_name_the_file() -> None:
    """The files are parsed by libyaml (seven times faster than PyYAML's Python parser on the
    policy file, which every app and registry loads), and a syntax error names the file."""
    assert issubclass(UniqueKeyLoader, yaml.cyaml.CParser)
    assert loads(ROLES.read_text(encoding="utf-8"), "roles.yaml") == yaml.safe_load(ROLES.read_text())
    with pytest.raises(yaml.YAMLError, match=r'in "probe\.yaml", line 3, column 1'):
        loads("a: 1\nb: [1,\n", "probe.yaml")

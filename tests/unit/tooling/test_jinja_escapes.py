"""A backslash escape inside a Jinja expression of a YAML scalar that YAML did not unescape (plain,
single-quoted, folded or literal) reaches what ansible-core renders as a backslash and a letter: the
boot unit's configuration once ended in a literal backslash-n and the runner could not parse it on a
node. A newline in rendered text comes from a double-quoted scalar (YAML turns its \\n into a newline
before Jinja sees it)."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[3]
EXPRESSION = re.compile(r"{{.*?}}|{%.*?%}", re.DOTALL)
ESCAPE = re.compile(r"\\[ntr]")


class _AnyTagLoader(yaml.SafeLoader):
    """Ansible's tags (!unsafe, !vault) load as their plain values."""


_AnyTagLoader.add_multi_constructor("!", lambda loader, suffix, node: loader.construct_scalar(node))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _yaml_files():
    for top in ("roles", "playbooks"):
        for path in sorted((REPO / top).rglob("*.yml")):
            if "templates" not in path.parts:
                yield path
    yield REPO / "site.yml"


def find_escapes(text: str) -> list[str]:
    found = []
    for document in yaml.load_all(text, Loader=_AnyTagLoader):
        for string in _strings(document):
            for expression in EXPRESSION.findall(string):
                if ESCAPE.search(expression):
                    found.append(expression)
    return found


def test_the_rule_finds_an_escape_only_where_yaml_left_it():
    folded = "content: >-\n  {{ data | to_json ~ '\\n' }}\n"
    double_quoted = "content: \"{{ data | to_json }}\\n{{ lines | join('\\n') }}\"\n"
    assert find_escapes(folded) == ["{{ data | to_json ~ '\\n' }}"]
    assert find_escapes(double_quoted) == []


@pytest.mark.parametrize("path", list(_yaml_files()), ids=lambda path: str(path.relative_to(REPO)))
def test_no_escape_reaches_jinja_unescaped(path):
    found = find_escapes(path.read_text())
    assert not found, (
        f"{path.relative_to(REPO)}: {found}: Jinja receives these backslashes as they are, so the rendered"
        " text holds a backslash and a letter; write the escape in a double-quoted YAML scalar (a task"
        " variable) and use that variable in the expression"
    )

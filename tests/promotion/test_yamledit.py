"""shared/promotion/yamledit.py: values files edited in place, every untouched line kept, the result
meaning (as PyYAML reads it) exactly the data asked for."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.engine import yamldoc
from shared.engine.errors import FleetError
from shared.promotion import yamledit
from tests.support.paths import EXAMPLES

DOC = """\
# Values of the demo application.
# Owned by the platform team.

applications:
  demo:  # the app
    source:
      repoURL: https://charts.example.com/demo  # upstream
      targetRevision: v1.2.0  # bumped by graduation
      chart: demo
    # Helm values, passed through.
    helm:
      valuesObject:
        replicas: 2

        # Resources for the main container.
        resources:
          cpu: 100m  # measured
          memory: "128Mi"
        nothing: ~
        enabled: True
        legacy: yes
        mode: 0o17
        when: 2024-01-02
        banner: |
          hello
          world
        flow: {a: 1, b: [x, y]}
    syncPolicy:
      syncOptions:
        - CreateNamespace=true  # always
        - ServerSideApply=true
      # retries for flaky clusters
      retry:
        limit: 3

    # Where it goes.
    destination:
      namespace: demo
"""


def changed(before: str, after: str) -> tuple[list[str], list[str]]:
    """(removed lines, added lines) of a line diff."""
    removed, added = [], []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return removed, added


def edit(text: str, change: Callable[[Any], None]) -> str:
    old = yamldoc.loads(text, "values.yaml")
    new = copy.deepcopy(old)
    change(new)
    out = yamledit.edit(text, "values.yaml", old, new)
    assert out is not None
    assert yamledit.same(yamldoc.loads(out, "values.yaml"), new)
    return out


def app(data: Any) -> Any:
    return data["applications"]["demo"]


def test_a_changed_scalar_changes_its_line_only() -> None:
    def change(d: Any) -> None:
        app(d)["source"]["targetRevision"] = "v1.3.0"

    out = edit(DOC, change)
    assert changed(DOC, out) == (
        ["      targetRevision: v1.2.0  # bumped by graduation"],
        ["      targetRevision: v1.3.0  # bumped by graduation"],
    )


def test_untouched_scalars_keep_their_spelling() -> None:
    def change(d: Any) -> None:
        app(d)["helm"]["valuesObject"]["replicas"] = 3

    out = edit(DOC, change)
    assert changed(DOC, out) == (["        replicas: 2"], ["        replicas: 3"])
    for line in ("nothing: ~", "enabled: True", "legacy: yes", "mode: 0o17", "when: 2024-01-02"):
        assert f"        {line}\n" in out
    assert '          memory: "128Mi"\n' in out
    assert "        banner: |\n          hello\n          world\n" in out
    assert "        flow: {a: 1, b: [x, y]}\n" in out


def test_an_added_key_goes_last_and_the_next_sections_comment_stays_before_its_key() -> None:
    def change(d: Any) -> None:
        app(d)["syncPolicy"]["retry"]["backoff"] = {"duration": "5s"}

    out = edit(DOC, change)
    assert changed(DOC, out) == ([], ["        backoff:", "          duration: 5s"])
    assert (
        "        limit: 3\n        backoff:\n          duration: 5s\n\n    # Where it goes.\n"
        in out
    )


def test_a_nested_new_mapping_is_created_on_the_way() -> None:
    def change(d: Any) -> None:
        app(d)["helm"]["valuesObject"]["resources"]["limits"] = {"cpu": {"max": "1"}}
        app(d)["ignoreDifferences"] = [{"kind": "Deployment", "jsonPointers": ["/spec"]}]

    out = edit(DOC, change)
    removed, added = changed(DOC, out)
    assert removed == []
    assert added == [
        "          limits:",
        "            cpu:",
        "              max: '1'",
        "    ignoreDifferences:",
        "      - kind: Deployment",
        "        jsonPointers:",
        "          - /spec",
    ]
    # A new key at the end of the file follows the last line, comments stay above.
    assert out.endswith(
        "      namespace: demo\n    ignoreDifferences:\n" + "\n".join(added[4:]) + "\n"
    )


def test_a_deleted_key_takes_its_line_and_leaves_the_comments_of_the_next_key() -> None:
    def change(d: Any) -> None:
        del app(d)["syncPolicy"]["syncOptions"]
        del app(d)["helm"]["valuesObject"]["replicas"]

    out = edit(DOC, change)
    removed, added = changed(DOC, out)
    assert added == []
    assert removed == [
        "        replicas: 2",
        "      syncOptions:",
        "        - CreateNamespace=true  # always",
        "        - ServerSideApply=true",
    ]
    assert "    syncPolicy:\n      # retries for flaky clusters\n      retry:\n" in out


def test_lists_keep_their_items_when_one_is_added_or_removed() -> None:
    def append(d: Any) -> None:
        app(d)["syncPolicy"]["syncOptions"].append("RespectIgnoreDifferences=true")

    out = edit(DOC, append)
    assert changed(DOC, out) == ([], ["        - RespectIgnoreDifferences=true"])
    assert "        - ServerSideApply=true\n        - RespectIgnoreDifferences=true\n" in out

    def prepend_and_drop(d: Any) -> None:
        options = app(d)["syncPolicy"]["syncOptions"]
        options.insert(0, "PruneLast=true")
        options.pop()

    out = edit(DOC, prepend_and_drop)
    assert changed(DOC, out) == (["        - ServerSideApply=true"], ["        - PruneLast=true"])
    assert "        - CreateNamespace=true  # always\n" in out


def test_a_list_replaced_by_a_different_one() -> None:
    def change(d: Any) -> None:
        app(d)["syncPolicy"]["syncOptions"] = ["Validate=false"]

    out = edit(DOC, change)
    removed, added = changed(DOC, out)
    assert added == ["        - Validate=false"]
    assert len(removed) == 2
    assert "      # retries for flaky clusters\n      retry:\n" in out


def test_a_scalar_that_becomes_a_mapping_keeps_the_comments_around_it() -> None:
    text = "a:\n  x: 1  # about x's value\n  # about y\n  y: 2\n"

    out = edit(text, lambda d: d["a"].__setitem__("x", {"k": 1}))

    # The inline comment keeps its column, now on the key's line.
    assert out == "a:\n  x:    # about x's value\n    k: 1\n  # about y\n  y: 2\n"


@pytest.mark.parametrize(
    "value", ["yes", "on", "No", "1_000", "0o7", "1e3", "12:30", "~", "null", "", "2024-01-02"]
)
def test_new_strings_pyyaml_would_read_as_something_else_are_quoted(value: str) -> None:
    out = edit("a:\n  b: 1\n", lambda d: d["a"].__setitem__("b", value))
    assert yamldoc.loads(out, "v.yaml") == {"a": {"b": value}}


def test_new_keys_pyyaml_would_read_as_something_else_are_quoted() -> None:
    out = edit("a:\n  b: 1\n", lambda d: d["a"].update({"on": {"yes": 1}, "1.0": "x"}))
    assert yamldoc.loads(out, "v.yaml") == {"a": {"b": 1, "on": {"yes": 1}, "1.0": "x"}}


def test_a_replaced_string_keeps_its_quotes() -> None:
    out = edit(DOC, lambda d: app(d)["helm"]["valuesObject"]["resources"].update(memory="256Mi"))
    assert changed(DOC, out) == (['          memory: "128Mi"'], ['          memory: "256Mi"'])


def test_new_values_of_every_type() -> None:
    values = {
        "n": None,
        "t": True,
        "i": -7,
        "f": 0.25,
        "big": 1e20,
        "inf": float("-inf"),
        "s": "plain text",
    }
    out = edit("a: {}\nb: 1\n", lambda d: d["a"].update(values))
    assert yamldoc.loads(out, "v.yaml")["a"] == values


def test_a_header_before_the_document_start_is_kept() -> None:
    text = "# header\n\n---\n# top\na: 1  # one\n"
    out = edit(text, lambda d: d.__setitem__("a", 2))
    assert out == "# header\n\n---\n# top\na: 2  # one\n"


@pytest.mark.parametrize(
    "text",
    [
        "a:\n    b:\n        c: 1\n    l:\n    - x\n",  # 4-space mappings, dashes at the key
        "a:\n  b:\n    c: 1\n  l:\n  - x\n",  # PyYAML's style
        "a:\n  b:\n    c: 1\n  l:\n    - x\n",  # the fleet examples' style
    ],
)
def test_indentation_of_the_file_is_kept(text: str) -> None:
    def change(d: Any) -> None:
        d["a"]["b"]["c"] = 2
        d["a"]["l"].append("y")

    out = edit(text, change)
    indent = text.split("\n")[4][: -len("- x")]
    assert out == text.replace("c: 1", "c: 2") + indent + "- y\n"


def test_windows_line_endings_are_kept() -> None:
    text = "# c\r\n---\r\na: 1\r\nb: 2\r\n"
    assert edit(text, lambda d: d.__setitem__("b", 3)) == "# c\r\n---\r\na: 1\r\nb: 3\r\n"


@pytest.mark.parametrize(
    "text", ["a: [\n", "a:\n  b: 1\n c: 2\n", "a: 'x\n", "a: 1\n- b\n", "# h\n---\na: [\n"]
)
def test_unparsable_text_is_a_fleet_error_naming_file_and_line_like_the_reader(text: str) -> None:
    with pytest.raises(FleetError) as plain:
        yamldoc.loads(text, "config/t/a/values.yaml")
    with pytest.raises(FleetError) as edited:
        yamledit.edit(text, "config/t/a/values.yaml", {"a": 1}, {"a": 2})
    assert (edited.value.path, edited.value.line) == (plain.value.path, plain.value.line)
    assert str(edited.value).startswith(f"config/t/a/values.yaml:{plain.value.line}: YAML syntax")


def test_what_cannot_be_edited_in_place_is_left_to_the_caller() -> None:
    # Duplicate keys: PyYAML keeps the last, ruamel refuses; a top level that is no mapping.
    assert yamledit.edit("a: 1\na: 2\n", "v.yaml", {"a": 2}, {"a": 3}) is None
    assert yamledit.edit("- 1\n", "v.yaml", [1], {"a": 1}) is None
    assert yamledit.edit("", "v.yaml", None, {"a": 1}) is None


def test_merge_keys_are_edited_only_where_the_meaning_holds() -> None:
    text = "base: &b\n  x: 1\nuse:\n  <<: *b\n  y: 2\n"
    old = yamldoc.loads(text, "v.yaml")
    new = copy.deepcopy(old)
    new["use"]["y"] = 3
    out = yamledit.edit(text, "v.yaml", old, new)
    assert out is None or yamledit.same(yamldoc.loads(out, "v.yaml"), new)
    new = copy.deepcopy(old)
    new["other"] = 1
    out = yamledit.edit(text, "v.yaml", old, new)
    assert out == text + "other: 1\n"


def test_an_encrypted_document_is_never_edited() -> None:
    text = "applications:\n  a:\n    key: ENC[AES256_GCM,data:x]\nsops:\n  mac: ENC[x]\n"
    old = yamldoc.loads(text, "config/t/a/values.yaml")
    new = copy.deepcopy(old)
    new["applications"]["a"]["other"] = 1
    with pytest.raises(FleetError, match=r"SOPS-encrypted.*never edits"):
        yamledit.edit(text, "config/t/a/values.yaml", old, new)


# --- properties ------------------------------------------------------------------------------

SAMPLES = [
    DOC,
    *(
        p.read_text()
        for p in sorted(EXAMPLES.glob("dimensions-fleet/config/*/*/values.yaml"))
        + sorted(EXAMPLES.glob("dimensions-fleet/config/*/*/*/values.yaml"))
    ),
]
WORDS = ["yes", "on", "v1.2.3", "1.10", "0x10", "~", "", "a b", "#x", "- y", "k: v", "it's", "1e3"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(),
    st.sampled_from(WORDS),
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "image", "on", "1.5", "~"]), inner, max_size=3),
    ),
    max_leaves=6,
)
OPS = ["set", "delete", "append", "insert", "new-key"]


def _containers(node: Any, out: list[Any]) -> list[Any]:
    if isinstance(node, (dict, list)):
        out.append(node)
        for child in node.values() if isinstance(node, dict) else node:
            _containers(child, out)
    return out


def _mutate(data: Any, ops: list[tuple[int, int, str, Any]]) -> None:
    for pick, where, op, value in ops:
        places = _containers(data, [])
        node = places[pick % len(places)]
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if op == "set" and keys:
            node[keys[where % len(keys)]] = value
        elif op == "delete" and len(keys) > 1:
            del node[keys[where % len(keys)]]
        elif op in ("append", "insert") and isinstance(node, list):
            node.insert(len(node) if op == "append" else where % (len(node) + 1), value)
        elif op == "new-key" and isinstance(node, dict):
            node[f"new{where % 3}"] = value


# derandomized: CI runs a fixed set; wider random runs (6,000 examples) are done by hand
@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    sample=st.sampled_from(SAMPLES),
    ops=st.lists(
        st.tuples(st.integers(0, 99), st.integers(0, 99), st.sampled_from(OPS), values),
        min_size=1,
        max_size=4,
    ),
)
def test_any_edit_means_exactly_the_new_data(sample: str, ops: list[Any]) -> None:
    old = yamldoc.loads(sample, "values.yaml")
    new = copy.deepcopy(old)
    _mutate(new, ops)
    out = yamledit.edit(sample, "values.yaml", old, new)
    # Plain mappings, lists and printable scalars edit in place; the one known exception is
    # ruamel's emitter garbling a block list item that follows an empty `{}` / `[]` item,
    # which edit's own meaning check catches (the caller then writes the file in full).
    if out is None:
        assert _empty_item_then_more(new), new
        return
    assert yamledit.same(yamldoc.loads(out, "values.yaml"), new)
    if yamledit.same(old, new):
        assert out == sample


def _empty_item_then_more(node: Any) -> bool:
    if isinstance(node, dict):
        return any(_empty_item_then_more(v) for v in node.values())
    if isinstance(node, list):
        empty_before_last = any(v in ({}, []) for v in node[:-1])
        return empty_before_last or any(_empty_item_then_more(v) for v in node)
    return False


def test_an_emptied_mapping_with_a_comment_on_its_key_edits_in_place() -> None:
    # ruamel would put `{}` after the key's comment; the emptied mapping is a fresh node.
    text = "apps:\n  demo:  # the app\n    a: 1\n  other:\n    b: 2\n"
    out = edit(text, lambda d: d["apps"].update(demo={}))
    assert out == "apps:\n  demo: {} # the app\n  other:\n    b: 2\n"


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of the one-line string and number leaves of `node`."""
    if isinstance(node, (dict, list)):
        children = node.items() if isinstance(node, dict) else enumerate(node)
        return [p for k, child in children for p in _leaves(child, (*path, k))]
    single = isinstance(node, (str, int)) and not isinstance(node, bool) and "\n" not in str(node)
    return [path] if single else []


@settings(max_examples=100, deadline=None, derandomize=True)
@given(sample=st.sampled_from(SAMPLES), pick=st.integers(0, 999), word=st.sampled_from(WORDS))
def test_setting_one_scalar_changes_one_line(sample: str, pick: int, word: str) -> None:
    old = yamldoc.loads(sample, "values.yaml")
    leaves = _leaves(old)
    *parents, last = leaves[pick % len(leaves)]
    new = copy.deepcopy(old)
    node = new
    for key in parents:
        node = node[key]
    node[last] = word
    out = yamledit.edit(sample, "values.yaml", old, new)
    assert out is not None
    assert yamledit.same(yamldoc.loads(out, "values.yaml"), new)
    removed, added = changed(sample, out)
    assert len(removed) == len(added) <= 1

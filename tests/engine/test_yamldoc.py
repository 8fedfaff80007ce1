"""yamldoc's fast paths against plain PyYAML: same documents loaded, same bytes dumped.

`loads_all` and `dumps` walk libyaml's nodes directly and memoise tag resolution; plain
PyYAML (`reference_loads_all`, `reference_dumps`) is the reference they must match exactly,
YAML 1.1 quirks included. Every comparison runs twice so warm caches are checked as well.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shared.engine import yamldoc
from shared.engine.errors import FleetError
from tests.support.paths import EXAMPLES, FIXTURES, GOLDEN

# YAML 1.1 as PyYAML reads it: the cases a YAML 1.2 parser or a hand-rolled resolver gets
# wrong, plus the constructs the fast path hands back to PyYAML.
CORPUS = [
    "a: yes\nb: No\nc: ON\nd: off\ne: y\nf: n\ng: True\nh: 'yes'\ni: \"on\"\n",
    "octal: 0755\nhex: 0x1F\nbin: 0b101\nsexa: 1:30\nsexaf: 190:20:30.15\nus: 1_000\n",
    "f1: 1e3\nf2: 1.0e3\nf3: .inf\nf4: -.Inf\nf5: .NaN\nf6: 6.8523015e+5\nf7: -0.0\n",
    "n1: ~\nn2: null\nn3: Null\nn4:\nn5: ''\nn6: 'null'\n",
    "t1: 2001-12-14t21:59:43.10-05:00\nt2: 2002-12-14\nt3: 2001-12-14 21:59:43.10\n",
    "t4: '2002-12-14'\nt5: 2002-12-14T10:00:00Z\n",
    "b: !!binary aGVsbG8=\ns: !!str 123\ni: !!int '42'\nf: !!float '1'\n",
    "base: &b {x: 1, y: [1, 2]}\nother: *b\nmerged:\n  <<: *b\n  z: 3\n",
    "list: &l [1, 2]\nagain: *l\n",
    "=: equals key\nplain: x\n",
    "dup: 1\nother: 2\ndup: 3\n",
    "1: int key\ntrue: bool key\n~: null key\n1.5: float key\n2001-01-01: date key\n",
    "s: !!set {a, b}\no: !!omap [{a: 1}, {b: 2}]\np: !!pairs [{a: 1}, {a: 2}]\n",
    "text: |\n  line one\n  line two\nfolded: >\n  folded\n  text\n",
    'unicode: héllo wörld ✓\nemoji: "\\U0001F600"\nescaped: "tab\\tnew\\nline"\n',
    "---\n---\n# only a comment\n---\na: 1\n---\n- x\n- y\n---\nplain scalar\n---\n42\n",
    "nested:\n  - a: 1\n    b: [x, {c: d}]\n  - []\n  - {}\n  - - deep\n",
    "flow: {a: [1, 2, {b: c}], 'quoted key': \"v\"}\n",
    "long: " + " ".join(["word"] * 60) + "\n",
    "key with spaces: value: with colon\n'#not comment': '- not a list'\n",
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  on: 'true'\n  '0755': 0755\n",
    "recursive: &r\n  self: *r\n",
    "? [a, b]\n: complex key\n",
    "? {a: 1}\n: complex key\n",
    "custom: !thing value\n",
    "a: !!map {b: 1}\nc: !!seq [1]\nd: !!null ''\ne: !!bool yes\n",
]

SYNTAX_ERRORS = [
    "a: [1, 2\n",
    "a: b\n c: d\n  e\n",
    "key: 'unterminated\n",
    "- a\nb: c\n",
    "*undefined\n",
]


def same(a: Any, b: Any, seen: set[tuple[int, int]] | None = None) -> bool:
    """Equal with the same types all the way down (1 == 1.0 == True otherwise); copes with
    recursive documents."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict | list | tuple):
        seen = set() if seen is None else seen
        if (id(a), id(b)) in seen:
            return True
        seen.add((id(a), id(b)))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k], seen) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y, seen) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def check_load(text: str) -> list[Any]:
    for _ in range(2):
        try:
            expected = yamldoc.reference_loads_all(text)
        except yaml.YAMLError as err:  # the reference fails: the fast path must fail alike
            with pytest.raises(FleetError) as fast:
                yamldoc.loads_all(text, "x.yaml")
            assert str(fast.value) == str(yamldoc.syntax_error(err, "x.yaml", text))
            return []
        got = yamldoc.loads_all(text, "x.yaml")
        assert same(got, expected), (text, got, expected)
    return got


@pytest.mark.parametrize("text", CORPUS)
def test_load_matches_pyyaml(text: str) -> None:
    check_load(text)


def test_load_shares_aliased_objects_like_pyyaml() -> None:
    doc = check_load("base: &b {x: 1}\nother: *b\n")[0]
    assert doc["base"] is doc["other"]
    doc = check_load("recursive: &r\n  self: *r\n")[0]
    assert doc["recursive"]["self"] is doc["recursive"]


def test_load_keeps_yaml_1_1_meaning() -> None:
    doc = check_load(CORPUS[0] + CORPUS[1])[0]
    assert doc["a"] is True and doc["d"] is False and doc["e"] == "y" and doc["h"] == "yes"
    assert doc["octal"] == 493 and doc["sexa"] == 90 and doc["us"] == 1000
    assert check_load(CORPUS[2])[0]["f1"] == "1e3"
    assert isinstance(check_load(CORPUS[4])[0]["t1"], datetime.datetime)
    assert check_load(CORPUS[10])[0] == {"dup": 3, "other": 2}


@pytest.mark.parametrize("text", SYNTAX_ERRORS)
def test_syntax_errors_are_the_same_fleet_errors(text: str) -> None:
    with pytest.raises(FleetError) as fast:
        yamldoc.loads_all(text, "x.yaml")
    try:
        yamldoc.reference_loads_all(text)
    except yaml.YAMLError as err:
        expected = yamldoc.syntax_error(err, "x.yaml", text)
    else:  # pragma: no cover - the corpus holds broken documents only
        pytest.fail("reference loaded a broken document")
    assert str(fast.value) == str(expected)


def test_unconstructable_tags_fail_like_pyyaml() -> None:
    with pytest.raises(FleetError, match="could not determine a constructor"):
        yamldoc.loads_all("custom: !thing value\n", "x.yaml")


def all_yaml_files() -> list[Path]:
    files = sorted(GOLDEN.rglob("*.yaml")) + sorted(FIXTURES.rglob("*.yaml"))
    files += sorted(EXAMPLES.rglob("*.yaml"))
    return [f for f in files if f.is_file()]


def test_repo_yaml_files_load_and_dump_like_pyyaml() -> None:
    files = all_yaml_files()
    assert len(files) > 50
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            yamldoc.reference_loads_all(text)
        except yaml.YAMLError:
            continue  # fixtures with deliberate mistakes: covered by the error tests
        for doc in check_load(text):
            assert yamldoc.dumps(doc) == yamldoc.reference_dumps(doc), path


def test_golden_files_are_fixed_points() -> None:
    """Rendered atlas output is normalized: loading and dumping it gives the same bytes.
    (Dimensions output keeps Go templating for Argo CD, so it is not.)"""
    files = sorted((GOLDEN / "atlas-fleet").rglob("*.yaml"))
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        (doc,) = yamldoc.loads_all(text, str(path))
        assert yamldoc.dumps(doc) == text, path


@pytest.mark.parametrize("text", CORPUS)
def test_dump_of_loaded_corpus_matches_pyyaml(text: str) -> None:
    for doc in check_load(text):
        for _ in range(2):
            assert yamldoc.dumps(doc) == yamldoc.reference_dumps(doc)


def test_dump_shares_like_pyyaml_and_falls_back_for_other_types() -> None:
    shared = {"k": [1, 2]}
    data: dict[str, Any] = {"a": shared, "b": shared, "c": [shared]}
    assert "&id001" in yamldoc.dumps(data)
    assert yamldoc.dumps(data) == yamldoc.reference_dumps(data)
    loop: dict[str, Any] = {"x": 1}
    loop["self"] = loop
    assert yamldoc.dumps(loop) == yamldoc.reference_dumps(loop)
    others = {
        "when": datetime.datetime(2024, 1, 2, 3, 4, 5),
        "day": datetime.date(2024, 1, 2),
        "raw": b"\x00\x01",
        "pair": (1, "a"),
        "set": {1, 2},
    }
    assert yamldoc.dumps(others) == yamldoc.reference_dumps(others)


class StrSub(str):
    pass


def test_dump_of_str_subclass_fails_like_pyyaml() -> None:
    with pytest.raises(yaml.representer.RepresenterError):
        yamldoc.reference_dumps({"a": StrSub("x")})
    with pytest.raises(yaml.representer.RepresenterError):
        yamldoc.dumps({"a": StrSub("x")})


# Strings that YAML 1.1 would read as something else, need quoting, or wrap.
TRICKY = [
    "",
    " ",
    "yes",
    "No",
    "on",
    "OFF",
    "y",
    "true",
    "null",
    "~",
    "0755",
    "0x1F",
    "1:30",
    "1e3",
    "1.0",
    ".inf",
    "-",
    "- x",
    "a: b",
    "#c",
    "x #c",
    "'q'",
    '"dq"',
    "@at",
    "`tick",
    "%p",
    "!bang",
    "&amp",
    "*star",
    "|pipe",
    ">gt",
    "?q",
    "=",
    "<<",
    "2002-12-14",
    " lead",
    "trail ",
    "multi\nline",
    "trailing newline\n",
    "\ttab",
    "ünïcödé",
    "\x85nel",
    "\u2028sep",
    "emoji 😀",
    "\x07bell",
    " ".join(["wrap"] * 30),
    "x" * 120,
]

scalars = (
    st.sampled_from(TRICKY)
    | st.text(max_size=40)
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.none()
)
keys = st.sampled_from(TRICKY) | st.text(max_size=20) | st.integers() | st.booleans() | st.none()
trees = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=5),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(trees)
def test_dump_matches_pyyaml_on_random_trees(data: Any) -> None:
    expected = yamldoc.reference_dumps(data)
    assert yamldoc.dumps(data) == expected
    assert yamldoc.dumps(data) == expected
    # and what we write reads back as PyYAML reads it
    assert same(yamldoc.loads_all(expected, "x.yaml"), yamldoc.reference_loads_all(expected))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(TRICKY) | st.text(max_size=30), min_size=1, max_size=8))
def test_plain_scalars_resolve_like_pyyaml(words: list[str]) -> None:
    """Unquoted text in many positions (keys, values, list items) resolves as PyYAML does."""
    lines = []
    for i, word in enumerate(words):
        flat = " ".join(word.split())
        lines.append(f"k{i}: {flat}")
        lines.append(f"{flat or 'empty'}{i}: v")
    lines.append("items:")
    lines += [f"  - {' '.join(w.split())}" for w in words]
    text = "\n".join(lines) + "\n"
    check_load(text)


words = st.lists(st.sampled_from(["a", "bb", "word", "x" * 12, "yes", "1", "-", "#"]), max_size=30)
long_scalars = words.map(" ".join) | st.integers(0, 120).map(lambda n: "w " * n)
deep = st.recursive(
    long_scalars,
    lambda kids: (
        st.lists(kids, min_size=1, max_size=3)
        | st.dictionaries(st.sampled_from(["k", "key", "a" * 30, "long key"]), kids, min_size=1)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(deep)
def test_dump_matches_pyyaml_near_the_line_width(data: Any) -> None:
    """Scalars with spaces at every indentation: libyaml wraps past column 80."""
    assert yamldoc.dumps(data) == yamldoc.reference_dumps(data)


def test_dump_block_layout_matches_pyyaml() -> None:
    data = {
        "a": {"b": [1, {"c": [], "d": {}}, [2, [3, {}]], []], "e": None},
        "list": [{"x": 1, "y": [{"z": "q"}]}, "s"],
        "empty": {},
        "f": 1.5,
        "g": -0.0,
        "h": True,
        "i": "0755",
        "j": "",
        1: "int key",
        None: "null key",
        2.5: "float key",
    }
    assert yamldoc.dumps(data) == yamldoc.reference_dumps(data)
    assert yamldoc.dumps([[], {}, [[1]]]) == yamldoc.reference_dumps([[], {}, [[1]]])
    assert yamldoc.dumps({}) == yamldoc.reference_dumps({}) == "{}\n"
    assert yamldoc.dumps([]) == yamldoc.reference_dumps([])


@pytest.mark.parametrize("depth", range(0, 16, 3))
def test_dump_wraps_where_libyaml_wraps(depth: int) -> None:
    for n in range(40, 82):
        text = " ".join(["word"] * (n // 5)) + "x" * (n % 5)
        data: Any = text
        for level in range(depth):
            data = {"key": data} if level % 2 else [data]
        data = {"top": data, "item": [text]}
        assert yamldoc.dumps(data) == yamldoc.reference_dumps(data), (depth, n)


# --- yamldoc.Similar: texts that differ from the previous one in a few scalars --------------

HELM_LIKE = """---
# Source: svc/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app00
  labels:
    app.kubernetes.io/name: app00
    tier: "backend"
    note: 'single'
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: app
          image: "registry.example.com/svc:1.0"
          args:
            - --port=8080
            - "quoted arg"
          env:
            - name: CLUSTER
              value: "c001-042"
            - name: ENABLED
              value: yes
          resources:
            requests:
              cpu: 10m
              memory: 32Mi
---
apiVersion: v1
kind: Service
metadata:
  name: app00
spec:
  ports:
    - port: 80
      targetPort: 8080
"""

NEW_VALUES = [
    *TRICKY,
    "app01",
    "3",
    "c009-999",
    '"c009-999"',
    "'x'",
    '"a\\tb"',
    "'it''s'",
    "[1, 2]",
    "{a: 1}",
    "&anchor x",
    "*alias",
    "!!int 3",
    "|",
    ">-",
    "x # comment",
    "abc:",
    "a:b",
    "2001-12-14",
    "1_000",
    "0o17",
    ".5",
    "+1",
    "-1",
    "~",
]
TAIL = re.compile(r"^(\s*(?:- )?(?:[^\s:#'\"-][^:#]*: )?)(.*)$", re.S)


def mutate(text: str, changes: list[tuple[int, str]]) -> str:
    lines = text.split("\n")
    for index, value in changes:
        i = index % len(lines)
        match = TAIL.match(lines[i])
        assert match is not None
        lines[i] = match.group(1) + value
    return "\n".join(lines)


def outcome(load: Callable[[], list[Any]], text: str) -> Any:
    try:
        return load()
    except FleetError as err:
        return ("error", str(err))
    except yaml.YAMLError as err:
        return ("error", str(yamldoc.syntax_error(err, "t.yaml", text)))
    except (ValueError, TypeError, OverflowError) as err:  # PyYAML's constructors: `!!int x`
        return ("error", str(yamldoc.value_error(err, "t.yaml")))


def check_similar(base: str, text: str) -> None:
    similar = yamldoc.Similar()
    assert same(similar.loads_all(base, "t.yaml", key="k"), yamldoc.reference_loads_all(base))
    got = outcome(lambda: similar.loads_all(text, "t.yaml", key="k"), text)
    want = outcome(lambda: yamldoc.reference_loads_all(text), text)
    assert same(got, want), (text, got, want)
    # and again, now that the mutated text is the kept one, back to the base
    if not isinstance(got, tuple):
        assert same(similar.loads_all(base, "t.yaml", key="k"), yamldoc.reference_loads_all(base))


def test_similar_builds_changed_values_without_a_parse() -> None:
    similar = yamldoc.Similar()
    similar.loads_all(HELM_LIKE, "t.yaml", key="k")
    text = (
        HELM_LIKE.replace("app00", "app01")
        .replace("replicas: 2", "replicas: 3")
        .replace("c001-042", "c009-999")
        .replace("value: yes", "value: off")
    )
    assert similar.skeletons["k"].patch(text) is not None
    docs = similar.loads_all(text, "t.yaml", key="k")
    assert same(docs, yamldoc.reference_loads_all(text))
    assert docs[0]["spec"]["replicas"] == 3 and docs[0]["metadata"]["name"] == "app01"
    env = docs[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[1]["value"] is False  # YAML 1.1: `off`
    # structure changes are parsed in full
    assert similar.skeletons["k"].patch(text.replace("replicas: 3", "replicas: [3]")) is None
    assert similar.skeletons["k"].patch(text + "extra: 1\n") is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.sampled_from(NEW_VALUES)), max_size=4))
# A duplicate key and a tag in one text: the second fast load gave up without a fallback.
@example(changes=[(30, "!bang"), (146, "")])
def test_similar_matches_pyyaml_on_mutated_manifests(changes: list[tuple[int, str]]) -> None:
    check_similar(HELM_LIKE, mutate(HELM_LIKE, changes))


@settings(max_examples=300, deadline=None)
@given(
    trees.filter(lambda t: isinstance(t, dict | list)),
    st.lists(
        st.tuples(st.integers(0, 200), st.sampled_from(NEW_VALUES) | st.text(max_size=12)),
        max_size=3,
    ),
)
def test_similar_matches_pyyaml_on_mutated_random_documents(
    data: Any, changes: list[tuple[int, str]]
) -> None:
    base = yamldoc.reference_dumps(data)
    check_similar(base, mutate(base, changes))


words_like_values = st.from_regex(r"[A-Za-z0-9_./:+=@~-]{1,10}", fullmatch=True)
quoted_like_values = words_like_values.map(lambda w: f'"{w}"') | words_like_values.map(
    lambda w: f"'{w}'"
)


def slot_lines(text: str) -> list[int]:
    similar = yamldoc.Similar()
    similar.loads_all(text, "t.yaml", key="k")
    return sorted(similar.skeletons["k"].slots)


HELM_SLOTS = slot_lines(HELM_LIKE)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(HELM_SLOTS), words_like_values | quoted_like_values),
        min_size=1,
        max_size=4,
    )
)
def test_similar_resolves_changed_words_like_pyyaml(changes: list[tuple[int, str]]) -> None:
    """Values in the lines of slots, most of which the patch takes (one word, plain or
    quoted like the value it replaces): each is resolved as PyYAML resolves it (`1:30`,
    `0x1F`, `1e3`, `Yes`, `2001-12-14`, ...)."""
    text = mutate(HELM_LIKE, changes)
    check_similar(HELM_LIKE, text)
    similar = yamldoc.Similar()
    similar.loads_all(HELM_LIKE, "t.yaml", key="k")
    skeleton = similar.skeletons["k"]
    takes = all(
        (value[0] == skeleton.slots[i].style)
        if skeleton.slots[i].style
        else bool(yamldoc.SAFE_PLAIN.fullmatch(value))
        for i, value in dict(changes).items()  # the last change of a line counts
    )
    assert (skeleton.patch(text) is not None) == takes


def test_similar_keeps_no_skeleton_where_lines_cannot_be_trusted() -> None:
    similar = yamldoc.Similar()
    duplicate = "a: 1\nb: 2\na: 3\n"  # the first `a` line is not where the value lives
    assert similar.loads_all(duplicate, "t.yaml", key="dup") == [{"a": 3, "b": 2}]
    assert "dup" not in similar.skeletons
    changed = "a: 5\nb: 2\na: 3\n"
    assert similar.loads_all(changed, "t.yaml", key="dup") == yamldoc.reference_loads_all(changed)
    crlf = "a: 1\r\nb: 2\r\n"
    similar.loads_all(crlf, "t.yaml", key="crlf")
    assert "crlf" not in similar.skeletons
    similar.loads_all("a: 'x'\nb: y # note\nc: !!str 1\n", "t.yaml", key="k")
    skeleton = similar.skeletons["k"]
    assert sorted(skeleton.slots) == [0]  # not after a comment, not with an explicit tag
    assert skeleton.patch("a: y\nb: y # note\nc: !!str 1\n") is None  # quoted → plain
    assert skeleton.patch("a: 'z'\nb: y # note\nc: !!str 1\n") == [{"a": "z", "b": "y", "c": "1"}]

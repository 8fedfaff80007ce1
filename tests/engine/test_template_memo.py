"""Memoised Go templates render exactly what the Helm engine renders, and only cache what is
a function of the field chains they read."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.engine.errors import FleetError
from shared.engine.helm import gotmpl, memo


@pytest.fixture(autouse=True)
def _cold_cache() -> None:
    memo.clear_cache()


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("namespace: {{ .atlas.instance.name }}\n", (("atlas", "instance", "name"),)),
        ("a: {{ .Values.port | quote }}\nb: {{ .port }}\n", (("port",),)),
        ("plain text only\n", ()),
        (
            '{{- if .ingress.enabled }}\nhost: {{ default "x" .ingress.host | upper }}\n'
            "{{- end }}\n",
            (("ingress", "enabled"), ("ingress", "host")),
        ),
        (
            "{{- range .items }}\n- {{ .name }}\n{{- end }}\n{{/* a comment */}}",
            (("items",), ("name",)),
        ),
        ('x: {{ printf "%s-%d" .a 3 }}\ny: {{- with .b -}} {{ .c }} {{- end }}', None),
        ('v: {{ "}}" }}{{ .a }}', (("a",),)),
    ],
)
def test_read_paths(text: str, paths: tuple[tuple[str, ...], ...] | None) -> None:
    if paths is None:  # cacheable, chains only checked to be there
        found = memo.read_paths(text)
        assert found is not None and ("a",) in found and ("b",) in found
    else:
        assert memo.read_paths(text) == paths


@pytest.mark.parametrize(
    "text",
    [
        "{{ $.Values.x }}",
        "{{ $x := .a }}{{ $x }}",
        "{{ range $k, $v := .a }}{{ $k }}{{ end }}",
        '{{ include "t" . }}',
        "{{ tpl .a . }}",
        "{{ toYaml . }}",
        "{{ .Values | toYaml }}",
        "{{ now }}",
        "{{ randAlphaNum 5 }}",
        "{{ keys .a }}",
        '{{ template "x" }}',
        '{{ env "HOME" }}',
        "{{ .a.b",
        "{{ .a x-}}",
    ],
)
def test_templates_that_may_read_more_are_not_cached(text: str) -> None:
    assert memo.read_paths(text) is None


def test_same_read_values_share_one_render_and_others_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "ns: {{ .atlas.instance.name }}\n"
    calls = 0
    real = gotmpl.render

    def counting(t: str, values: dict[str, Any], *, source: str, host: Any) -> str:
        nonlocal calls
        calls += 1
        return real(t, values, source=source, host=host)

    monkeypatch.setattr(gotmpl, "render", counting)
    outs = [
        memo.render(
            text,
            {"cluster": c, "atlas": {"instance": {"name": name}, "cluster": {"id": c}}},
            source="t",
            host=None,
        )
        for c in ("a", "b", "c")
        for name in ("web", "api")
    ]
    assert outs == ["ns: web\n", "ns: api\n"] * 3  # byte for byte, final newline kept
    assert calls == 2


def test_errors_are_not_cached() -> None:
    text = '{{ required "need .a" .a }}'
    for _ in range(2):
        with pytest.raises(FleetError, match=r"need \.a"):
            memo.render(text, {"a": None}, source="t.gotmpl", host=None)
    assert memo.render(text, {"a": "x"}, source="t.gotmpl", host=None) == "x"


# Templates mixing chains, `with`/`range` (which move the dot into a read value), missing
# keys, `.Values.x` vs `.x`, and pure functions; rendered for random contexts with and
# without the cache.
TEMPLATES = [
    "a: {{ .a }}\nb: {{ .Values.b.c | quote }}\n",
    "{{- with .a }}in: {{ .c }}{{ else }}out: {{ .b }}{{ end }}\n",
    "{{- range .list }}\n- item{{ end }}\n{{ .list | toJson }}",
    '{{- range .maps }}\n- {{ .c | default "none" }}{{ end }}\n',
    '{{ if and .a (eq (toString .b) "1") }}yes{{ else }}no{{ end }}\n',
    "{{ toYaml .b | nindent 2 }}\n{{ .b.c.d }}\n",
    "{{ .a.c }}",
]

keys = st.sampled_from(["a", "b", "c", "d", "list", "maps", "Values", "x"])
leaves = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "1", "x", "yes"])
trees = st.recursive(
    leaves,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(keys, kids, max_size=4),
    max_leaves=12,
)
contexts = st.dictionaries(keys, trees, max_size=6)


def engine(text: str, context: dict[str, Any]) -> str | type[FleetError]:
    try:
        return gotmpl.render(text, context, source="t", host=None)
    except FleetError:
        return FleetError


def memoised(text: str, context: dict[str, Any]) -> str | type[FleetError]:
    try:
        return memo.render(text, context, source="t", host=None)
    except FleetError:
        return FleetError


@settings(max_examples=60, deadline=None)
@given(st.lists(contexts, min_size=2, max_size=5))
def test_memo_renders_what_the_engine_renders(batch: list[dict[str, Any]]) -> None:
    for text in TEMPLATES:
        assert memo.read_paths(text) is not None
        for context in batch + batch:
            assert memoised(text, context) == engine(text, context), (text, context)

"""yq v4's bytes for the YAML rendered manifests use (shared/engine/helmfile/yqdoc.py)."""

from __future__ import annotations

import pytest

from shared.engine.helmfile import yqdoc


def _roundtrip(text: str) -> str:
    return yqdoc.print_documents(yqdoc.read(text))


def test_sequences_are_indented_under_their_key_and_styles_are_kept() -> None:
    source = (
        'a:\n- x\n- y: 1\n  z: [1, "two", {k: v}]\nb: \'single\'\nc: "double\\ttab"\n'
        "d: |\n  line\n\n  more\ne:\nf: {}\n"
    )
    assert _roundtrip(source) == (
        'a:\n  - x\n  - y: 1\n    z: [1, "two", {k: v}]\nb: \'single\'\nc: "double\\ttab"\n'
        "d: |\n  line\n\n  more\ne:\nf: {}\n"
    )


def test_leading_content_is_kept_verbatim_and_later_documents_get_separators() -> None:
    source = "---\n# Source: a\n\n# note\nk: 1\n---\n# Source: b\nk: 2\n"
    assert _roundtrip(source) == source
    assert yqdoc.print_documents(yqdoc.read(source), separators=False) == (
        "# Source: a\n\n# note\nk: 1\n# Source: b\nk: 2\n"
    )


def test_head_comment_strips_the_comment_markers() -> None:
    doc = yqdoc.read("# Source: a\n# Kuberenderer: x.yaml\nk: 1\n")[0]
    assert yqdoc.head_comment(doc) == "Source: a\nKuberenderer: x.yaml"


@pytest.mark.parametrize(
    "text",
    [
        "a: 1 # trailing\n",
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "a: 0\n---\n# one\n\n# two\na: 1\n",
    ],
)
def test_what_is_not_reproduced_is_refused(text: str) -> None:
    with pytest.raises(yqdoc.NotReproduced):
        _roundtrip(text)


def test_deleting_the_last_key_leaves_an_empty_flow_map() -> None:
    docs = yqdoc.read("metadata:\n  labels:\n    a: b\n")
    yqdoc.delete(docs[0].node, ("metadata", "labels", "a"))
    assert yqdoc.print_documents(docs) == "metadata:\n  labels: {}\n"

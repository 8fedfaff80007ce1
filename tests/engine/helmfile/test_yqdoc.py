"""yq v4's bytes for the YAML rendered manifests use (shared/engine/helmfile/yqdoc.py)."""

from __future__ import annotations

import re

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


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        # `#` inside scalars is no comment: plain, quoted, block, flow and empty values
        ("a: x#y\nb: 'p # q'\nc: \"r # s\"\nd: |\n  # t\ne: {f: '#'}\ng:\n", None),
        ("a: 1\nb: x # trailing\n", "a comment inside a document ('# trailing')"),
        ("a: 1\nb:  # after an empty value\n", "a comment inside a document"),
        # an anchor or a tag before a scalar moves its event, not its token
        ("a: &x 1 # c\n", "anchors and aliases are not reproduced"),
        ("a: !t v # c\n", "the explicit tag !t is not reproduced"),
    ],
)
def test_comments_are_told_from_scalars(text: str, refusal: str | None) -> None:
    if refusal is None:
        assert yqdoc.read(text)
        return
    with pytest.raises(yqdoc.NotReproduced, match=re.escape(refusal)):
        yqdoc.read(text)


def test_a_text_read_again_gives_new_nodes() -> None:
    """The second read of a text (kept events) builds nodes of its own: a change to the
    first read's documents does not reach it."""
    text = "metadata:\n  labels:\n    a: b\n"
    first = yqdoc.read(text)
    yqdoc.delete(first[0].node, ("metadata", "labels", "a"))
    assert yqdoc.print_documents(yqdoc.read(text)) == text

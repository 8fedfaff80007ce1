"""The structured diff (`diff.json`): resources with kind/name/namespace and line counts,
hunks kept line for line, and the unified / side-by-side rows the job page renders."""

from __future__ import annotations

from shared.review.diff import RenderFiles, diff_renders
from shared.review.diffdoc import (
    DiffDocument,
    changed_parts,
    diff_document,
    identify,
    split_rows,
    unified_rows,
)

DEPLOYMENT = b"""apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    name: label-not-name
  name: web
  namespace: shop
spec:
  replicas: 2
  template:
    metadata:
      name: pod-template
"""


def test_identify_reads_kind_name_and_namespace_of_the_first_document() -> None:
    assert identify(DEPLOYMENT) == ("Deployment", "web", "shop")
    assert identify(b"kind: 'Namespace'\nmetadata:\n  name: \"prod\"\n") == (
        "Namespace",
        "prod",
        None,
    )
    assert identify(b"just: values\n") == (None, None, None)


def test_document_counts_lines_and_keeps_hunks() -> None:
    old = {"a.yaml": DEPLOYMENT, "gone.yaml": b"kind: ConfigMap\nmetadata:\n  name: gone\n"}
    new = {"a.yaml": DEPLOYMENT.replace(b"replicas: 2", b"replicas: 3\n  paused: true")}
    diff = diff_renders(old, new)
    doc = DiffDocument.model_validate_json(diff_document(diff, old, new).to_json())
    assert (doc.added, doc.removed, doc.changed) == (0, 1, 1)
    changed, gone = doc.resources
    assert (changed.path, changed.status, changed.title) == (
        "a.yaml",
        "changed",
        "Deployment shop/web",
    )
    assert (changed.additions, changed.deletions) == (2, 1)
    (hunk,) = changed.hunks
    assert hunk.header.startswith("@@ -6,") and hunk.old_start == 6
    assert [line for line in hunk.lines if line[0] in "+-"] == [
        "-  replicas: 2",
        "+  replicas: 3",
        "+  paused: true",
    ]
    assert (gone.status, gone.title, gone.deletions, gone.additions) == (
        "removed",
        "ConfigMap gone",
        3,
        0,
    )
    assert doc.additions == 2 and doc.deletions == 4


def test_hidden_changes_are_named_not_shown() -> None:
    shown = b"kind: Secret\nmetadata:\n  name: s\ndata:\n  key: REDACTED\n"
    old = RenderFiles({"s.yaml": shown}, {"s.yaml": "sha256:a"}, {"s.yaml": {"/data/key": "1"}})
    new = RenderFiles({"s.yaml": shown}, {"s.yaml": "sha256:b"}, {"s.yaml": {"/data/key": "2"}})
    (resource,) = diff_document(diff_renders(old, new), old.files, new.files).resources
    assert resource.hidden == ["/data/key"] and resource.hunks == []


def test_rows_number_lines_and_pair_runs_side_by_side() -> None:
    old = b"a\nb\nc\nd\n"
    new = b"a\nB\nC\nX\nd"
    (resource,) = diff_document(
        diff_renders({"f": old}, {"f": new}), {"f": old}, {"f": new}
    ).resources
    (hunk,) = resource.hunks
    rows = list(unified_rows(hunk))
    assert [(r.kind, r.old_no, r.new_no, r.text) for r in rows] == [
        ("ctx", 1, 1, "a"),
        ("del", 2, None, "b"),
        ("del", 3, None, "c"),
        ("del", 4, None, "d"),
        ("add", None, 2, "B"),
        ("add", None, 3, "C"),
        ("add", None, 4, "X"),
        ("add", None, 5, "d"),
        ("note", None, None, "\\ No newline at end of file"),
    ]
    pairs = [
        (p.left.text if p.left else None, p.right.text if p.right else None)
        for p in split_rows(hunk)
    ]
    assert pairs == [
        ("a", "a"),
        ("b", "B"),
        ("c", "C"),
        ("d", "X"),
        (None, "d"),
        ("\\ No newline at end of file", "\\ No newline at end of file"),
    ]


def test_changed_parts_mark_words_not_shared_letters() -> None:
    assert changed_parts("  region: eu", "  region: us") == (
        [("  region: ", False), ("eu", True)],
        [("  region: ", False), ("us", True)],
    )
    _, new = changed_parts("image: nginx:1.25.3", "image: nginx:1.27.0")
    assert [text for text, changed in new if changed] == ["27", "0"]
    # lines too different are the change as a whole
    assert changed_parts("abc def", "xyz uvw") == ([("abc def", False)], [("xyz uvw", False)])

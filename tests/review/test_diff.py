"""The render diff: counts, sections, hidden (redacted) changes and the check-run cut."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from shared.github.limits import OUTPUT_LIMIT
from shared.review.diff import RenderFiles, diff_renders

URL = "http://rollwright.test/jobs/d-1"


def cm(name: str, **data: str) -> bytes:
    body = "".join(f"  {k}: {v}\n" for k, v in data.items())
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n{body}".encode()


def size(text: str) -> int:
    return len(text.encode())


def test_counts_and_sections_sorted_by_path() -> None:
    old = {"a/ConfigMap_x.yaml": cm("x", k="1"), "b/ConfigMap_gone.yaml": cm("gone", k="1")}
    new = {
        "a/ConfigMap_x.yaml": cm("x", k="2"),
        "a/ConfigMap_new.yaml": cm("new", k="1"),
        "c/ConfigMap_same.yaml": cm("same"),
    }
    old["c/ConfigMap_same.yaml"] = cm("same")
    diff = diff_renders(old, new)
    assert (diff.added, diff.removed, diff.changed, diff.empty) == (1, 1, 1, False)
    assert [f.path for f in diff.files] == [
        "a/ConfigMap_new.yaml",
        "a/ConfigMap_x.yaml",
        "b/ConfigMap_gone.yaml",
    ]
    text = diff.markdown(URL)
    assert text.startswith("**3 resource(s)**: 1 added, 1 removed, 1 changed.")
    assert "#### ~ `a/ConfigMap_x.yaml` (changed)" in text
    assert "-  k: 1\n+  k: 2\n" in text
    assert "--- /dev/null\n+++ b/a/ConfigMap_new.yaml" in text
    assert "--- a/b/ConfigMap_gone.yaml\n+++ /dev/null" in text
    assert "same" not in text


def test_nothing_deployed_means_everything_added() -> None:
    diff = diff_renders(None, {"x.yaml": cm("x", a="1")})
    assert (diff.added, diff.removed, diff.changed) == (1, 0, 0)
    assert "+kind: ConfigMap" in diff.markdown()


def test_identical_renders_are_empty() -> None:
    files = {"x.yaml": cm("x", a="1")}
    diff = diff_renders(files, dict(files))
    assert diff.empty
    assert diff.check_run_text(URL).startswith("**No changes**")


def test_missing_final_newline_is_marked() -> None:
    diff = diff_renders({"x.yaml": b"a: 1\n"}, {"x.yaml": b"a: 1"})
    assert diff.changed == 1
    assert "\\ No newline at end of file" in diff.markdown()


def test_fence_longer_than_backticks_in_content() -> None:
    content = b"data:\n  readme: |\n    ```\n    ````sh\n    code\n    ````\n"
    text = diff_renders(None, {"x.yaml": content}).markdown()
    tokens = MarkdownIt().parse(text)
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1
    assert "````sh" in fences[0].content  # the content stayed inside one code block


def test_hidden_secret_change_counts_without_showing_values() -> None:
    shown = b"apiVersion: v1\nkind: ConfigMap\ndata:\n  url: REDACTED\n"
    old = RenderFiles({"x.yaml": shown}, {"x.yaml": "sha256:a"}, {"x.yaml": {"/0/data/url": "1"}})
    new = RenderFiles({"x.yaml": shown}, {"x.yaml": "sha256:b"}, {"x.yaml": {"/0/data/url": "2"}})
    diff = diff_renders(old, new)
    assert diff.changed == 1
    text = diff.markdown()
    assert "Redacted values changed (not shown): `/0/data/url`" in text
    assert "```diff" not in text  # nothing visible changed, so no unified diff
    same = RenderFiles({"x.yaml": shown}, {"x.yaml": "sha256:a"}, {"x.yaml": {"/0/data/url": "1"}})
    assert diff_renders(old, same).empty


def test_hidden_change_without_leaf_digests_still_counts() -> None:
    shown = b"a: REDACTED\n"
    old = RenderFiles({"x.yaml": shown}, {"x.yaml": "sha256:a"})
    new = RenderFiles({"x.yaml": shown}, {"x.yaml": "sha256:b"})
    text = diff_renders(old, new).markdown()
    assert "Redacted values changed (not shown): the file" in text


def test_a_rotated_marker_key_is_not_a_change() -> None:
    """The same plaintext shown with other markers (a rotated key, or a render stored before
    markers were keyed) is not a change to review; another plaintext still is."""
    old = RenderFiles({"s.yaml": b"password: REDACTED:sha256:0123456789ab\n"}, {"s.yaml": "d1"})
    new = RenderFiles({"s.yaml": b"password: REDACTED:hmac:ba9876543210\n"}, {"s.yaml": "d1"})
    assert diff_renders(old, new).empty
    rotated = RenderFiles({"s.yaml": b"password: REDACTED:hmac:ffff00001111\n"}, {"s.yaml": "d2"})
    assert [f.path for f in diff_renders(new, rotated).files] == ["s.yaml"]


def test_renders_stored_without_digests_compare_by_bytes() -> None:
    assert diff_renders(RenderFiles({"x": b"1\n"}), RenderFiles({"x": b"1\n"}, {"x": "d"})).empty


def _many(n: int, lines: int) -> dict[str, bytes]:
    return {
        f"r{i:03d}/ConfigMap_c{i}.yaml": cm(
            f"c{i}", **{f"k{j}": f"value-{i}-{j}-ünïcødé" for j in range(lines)}
        )
        for i in range(n)
    }


def test_check_run_text_cut_between_whole_resources() -> None:
    diff = diff_renders(None, _many(300, 12))
    full = diff.markdown(URL)
    assert size(full) > OUTPUT_LIMIT
    text = diff.check_run_text(URL)
    assert size(text) <= OUTPUT_LIMIT
    shown = re.findall(r"^#### \+ `([^`]+)`", text, re.MULTILINE)
    assert shown and len(shown) < 300
    marker = (
        f"**Diff exceeds the limit:** showing {len(shown)} of 300 resources. [Full diff]({URL})"
    )
    assert marker in text
    body = text[: text.index("\n**Diff exceeds the limit:**")]
    # every shown resource is complete: its section is exactly the one in the full diff
    sections = diff.sections()
    assert body == diff.header(URL) + "".join(sections[: len(shown)])
    # and the next one would not have fit
    next_marker = marker.replace(f"showing {len(shown)} ", f"showing {len(shown) + 1} ")
    assert size(body + sections[len(shown)] + "\n" + next_marker + "\n") > OUTPUT_LIMIT
    tokens = MarkdownIt().parse(text)
    assert sum(t.type == "fence" for t in tokens) == len(shown)


def test_check_run_text_fits_exactly_at_the_limit() -> None:
    diff = diff_renders(None, _many(40, 12))
    text = diff.markdown(URL)
    assert diff.check_run_text(URL, limit=size(text)) == text
    cut = diff.check_run_text(URL, limit=size(text) - 1)
    assert "Diff exceeds the limit" in cut
    assert size(cut) <= size(text) - 1


def test_one_huge_resource_shows_its_start() -> None:
    huge = cm("big", **{f"k{j}": "x" * 200 for j in range(1000)})
    diff = diff_renders(None, {"a/ConfigMap_big.yaml": huge, "b/ConfigMap_small.yaml": cm("s")})
    text = diff.check_run_text(URL)
    assert size(text) <= OUTPUT_LIMIT
    assert "showing the start of 1 of 2 resources" in text
    assert "+kind: ConfigMap" in text
    tokens = MarkdownIt().parse(text)
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and fences[0].info == "diff"  # the cut closed its code block
    assert "ConfigMap_small" not in text

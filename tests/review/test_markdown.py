"""The preview's Markdown: always within the byte budget, always valid CommonMark (every fence
and `<details>` closed), cut by whole resources, then one truncated resource and a marker."""

from __future__ import annotations

import re
from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activities.preview import outcome_of
from shared.contracts.deploy import RepoRef
from shared.contracts.preview import PreviewBuildRequest, PreviewRevisions
from shared.github.app import CheckRunOutput
from shared.github.limits import OUTPUT_LIMIT
from shared.review.diff import FileDiff, RenderDiff, diff_renders
from shared.review.markdown import report_markdown
from shared.review.noise import HiddenChange
from shared.review.report import PreviewReport, RootPreview
from tests.support.markdown import assert_valid, fences, paragraphs

BASE = "a" * 40
HEAD = "b" * 40
URL = "https://rollwright.test/previews/acme/fleet/7/bbbbbbb"


def cm(name: str, body: str) -> bytes:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n{body}".encode()


def root_of(
    name: str, files: Mapping[str, tuple[bytes | None, bytes | None]], **kw: object
) -> RootPreview:
    old = {p: a for p, (a, _) in files.items() if a is not None}
    new = {p: b for p, (_, b) in files.items() if b is not None}
    diff = diff_renders(old, new)
    status = "unchanged" if diff.empty else "changed"
    return RootPreview(name, status, diff, **kw)  # type: ignore[arg-type]


def big_report(roots: int = 3, files: int = 40, lines: int = 30) -> PreviewReport:
    previews = []
    for r in range(roots):
        changes = {}
        for f in range(files):
            old = "".join(f"  k{i}: old-{r}-{f}-{i}\n" for i in range(lines))
            new = "".join(f"  k{i}: new-{r}-{f}-{i}\n" for i in range(lines))
            changes[f"app/ns/ConfigMap_c{f:03}.yaml"] = (cm(f"c{f}", old), cm(f"c{f}", new))
        previews.append(root_of(f"group/cluster-{r}", changes))
    return PreviewReport(BASE, HEAD, previews)


def test_small_report_is_whole_and_valid() -> None:
    report = big_report(roots=2, files=2, lines=2)
    text = report_markdown(report, full_url=URL)
    tokens = assert_valid(text, OUTPUT_LIMIT)
    assert text.startswith("### rollwright preview\n")
    assert "Diff exceeds the limit" not in text
    assert len(fences(tokens)) == 4
    assert "| `group/cluster-0` | changed | 0 | 0 | 2 | 0 |" in text
    assert "<details open>\n<summary><code>group/cluster-1</code>" in text
    assert "<summary>~ <code>app/ns/ConfigMap_c001.yaml</code> (changed)</summary>" in text
    assert "**Resources:** 0 added, 0 removed, 4 changed; 0 hidden as noise." in text
    assert report_markdown(report, limit=None) == text


def test_cut_by_whole_resources_then_one_truncated_with_marker() -> None:
    report = big_report()
    whole = report_markdown(report, limit=None)
    assert len(whole.encode()) > OUTPUT_LIMIT
    text = report_markdown(report, full_url=URL)
    tokens = assert_valid(text, OUTPUT_LIMIT)
    assert len(text.encode()) > OUTPUT_LIMIT - 2_000  # the budget is used, not wasted
    marker = [p for p in paragraphs(tokens) if "Diff exceeds the limit" in p]
    assert len(marker) == 1
    kept = len(re.findall(r"\(changed\)</summary>", text))
    assert f"showing {kept} of 120 resource(s) and the start of one more" in marker[0]
    assert f"[Full diff]({URL})" in marker[0]
    assert text.count("(changed, cut: the diff exceeds the limit)</summary>") == 1
    # Every kept resource is whole: its fence holds the whole unified diff.
    diffs = {f.unified for r in report.roots for f in r.diff.files}  # type: ignore[union-attr]
    shown = fences(tokens)
    assert sum(1 for body in shown if body in diffs) == kept
    assert sum(1 for body in shown if body not in diffs) == 1  # the truncated one
    partial = next(body for body in shown if body not in diffs)
    assert any(d.startswith(partial.rsplit("\n", 2)[0]) for d in diffs)


def test_without_url_the_marker_names_the_local_command() -> None:
    text = report_markdown(big_report(), limit=8_000)
    assert_valid(text, 8_000)
    assert f"Run `rollwright diff {BASE} {HEAD}` for the full diff." in text


def test_too_small_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1024 bytes"):
        report_markdown(big_report(), limit=500)


def test_pathological_content_stays_inside_its_blocks() -> None:
    evil = (
        "  readme: |\n    ```\n    </details>\n    ````sh\n     ```\n    <details>\n"
        "    </summary>\n    ~~~\n    | a | b |\n"
    )
    report = PreviewReport(
        BASE,
        HEAD,
        [
            root_of(
                "g/`odd|root`",
                {"x/ConfigMap_</details>.yaml": (None, cm("evil", evil))},
                hidden=[HiddenChange("y/<b>.yaml", ("/0/metadata/labels/a``b",))],
            ),
            RootPreview(
                "g/broken",
                "error",
                None,
                head_error="template: ```\n</details>\n<details>\nfail: ````",
            ),
        ],
        warnings=["merge ref missing </details> ``` <details>"],
    )
    for limit in (None, 1_024, 1_500, 2_000, 3_000, OUTPUT_LIMIT):
        text = report_markdown(report, limit=limit, full_url=URL)
        tokens = assert_valid(text, limit)
        if limit == OUTPUT_LIMIT:
            bodies = fences(tokens)
            assert any("</details>\n" in b and "````sh" in b for b in bodies)
            assert any("fail: ````" in b for b in bodies)  # the error, in its own fence
            assert "Reproduce locally: `rollwright diff" in text


@st.composite
def reports(draw: st.DrawFn) -> PreviewReport:
    piece = st.sampled_from(
        [*"ab `<>/|~-+#*_\\é€😀\t", "```", "````", "</details>", "<details>", "~~~", "    ", "<!--"]
    )
    line = st.lists(piece, max_size=20).map("".join)
    previews = []
    for r in range(draw(st.integers(1, 4))):
        files: dict[str, tuple[bytes | None, bytes | None]] = {}
        for f in range(draw(st.integers(0, 6))):
            old = draw(st.one_of(st.none(), st.lists(line, max_size=40)))
            new = draw(st.one_of(st.none(), st.lists(line, max_size=40)))
            if old is None and new is None:
                new = ["x"]
            files[f"d/f{f}.yaml"] = (
                None if old is None else "".join(x + "\n" for x in old).encode(),
                None if new is None else "".join(x + "\n" for x in new).encode(),
            )
        kind = draw(st.sampled_from(["ok", "head-error", "base-error"]))
        hidden = [
            HiddenChange(f"h/{i}.yaml", (draw(line),)) for i in range(draw(st.integers(0, 3)))
        ]
        if kind == "head-error":
            previews.append(
                RootPreview(f"r{r}", "error", None, head_error=draw(line) + "\n" + draw(line))
            )
        else:
            preview = root_of(f"r{r}", files, hidden=hidden)
            if kind == "base-error":
                preview = RootPreview(
                    preview.root, preview.status, preview.diff, base_error=draw(line), hidden=hidden
                )
            previews.append(preview)
    warnings = draw(st.lists(line, max_size=2))
    return PreviewReport(BASE, HEAD, previews, warnings=warnings)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(report=reports(), limit=st.integers(1_024, 12_000), url=st.booleans())
def test_any_report_at_any_limit_is_valid_markdown(
    report: PreviewReport, limit: int, url: bool
) -> None:
    text = report_markdown(report, limit=limit, full_url=URL if url else None)
    assert_valid(text, limit)
    whole = report_markdown(report, limit=None, full_url=URL if url else None)
    assert_valid(whole)
    if len(whole.encode()) <= limit:
        assert text == whole
    else:
        assert "Diff exceeds the limit" in text or "left out to stay within" in text


def test_every_limit_from_small_to_large() -> None:
    report = big_report(roots=4, files=6, lines=12)
    size = len(report_markdown(report, limit=None).encode())
    for limit in range(1_024, size + 200, 97):
        assert_valid(report_markdown(report, limit=limit, full_url=URL), limit)


def test_summary_of_thousands_of_roots_keeps_to_half_the_budget() -> None:
    previews = [
        root_of(f"region-{i:04}/cluster", {"a.yaml": (b"a: 1\n", b"a: 2\n")}) for i in range(3_000)
    ]
    report = PreviewReport(BASE, HEAD, previews, all_roots=True)
    text = report_markdown(report, full_url=URL)
    tokens = assert_valid(text, OUTPUT_LIMIT)
    assert "(a global input changed: every root)" in text
    assert "summary item(s) (warnings, errors, table rows) left out" in text
    table_end = text.index("summary item(s)")
    assert len(text[:table_end].encode()) <= OUTPUT_LIMIT // 2
    assert any("Diff exceeds the limit" in p for p in paragraphs(tokens))


def test_noise_and_errors_are_listed() -> None:
    report = PreviewReport(
        BASE,
        HEAD,
        [
            RootPreview(
                "g/c1",
                "unchanged",
                RenderDiff(),
                hidden=[
                    HiddenChange(
                        "web/Deployment.apps_web.yaml", ("/0/metadata/labels/helm.sh~1chart",)
                    )
                ],
            ),
            RootPreview("g/c2", "error", None, head_error='rendering root "g/c2": boom'),
            RootPreview(
                "g/c3",
                "changed",
                RenderDiff([FileDiff("a.yaml", "added", "--- /dev/null\n+++ b/a.yaml\n+a: 1\n")]),
                base_error='rendering root "g/c3": old boom',
            ),
        ],
        warnings=["the merge ref is missing (conflicts?): the PR head is rendered instead"],
    )
    text = report_markdown(report, full_url=URL)
    assert_valid(text, OUTPUT_LIMIT)
    assert "> **Warning:** the merge ref is missing (conflicts?)" in text
    assert "**Failed on the PR side**: root `g/c2` does not render." in text
    assert f"Reproduce locally: `rollwright diff {BASE} {HEAD} --root g/c2`" in text
    assert "**Base side failed to render** root `g/c3`" in text
    assert "| `g/c2` | **failed** |  |  |  | 0 |" in text
    assert "| `g/c3` | changed (base side failed to render) | 1 | 0 | 0 | 0 |" in text
    assert "**Hidden as noise** (1)" in text
    assert "- `web/Deployment.apps_web.yaml`: `/0/metadata/labels/helm.sh~1chart`" in text
    custom = report_markdown(report, repro="make preview PR=7", title="")
    assert "Reproduce locally: `make preview PR=7`" in custom
    assert not custom.startswith("###")


def test_the_check_run_summary_fits_and_escapes_what_the_report_quotes() -> None:
    """The summary is its own 65,535-byte field: long one-line warnings (an unreadable base
    fleet quoting a file), many base-side errors and HTML in them can neither overflow it nor
    open markup in it."""

    huge = "the base revision cannot be read: <details><summary>x " + "y" * 20_000
    roots = [
        RootPreview(f"g/c{i:03}", "changed", RenderDiff([]), base_error="<details> " + "z" * 900)
        for i in range(60)
    ]
    report = PreviewReport(BASE, HEAD, roots, warnings=[huge] * 8)
    request = PreviewBuildRequest(
        repo=RepoRef(owner="acme", name="fleet", installation_id=1, clone_url="/x"),
        pr=7,
        revisions=PreviewRevisions(
            base_sha=BASE, head_sha=HEAD, pr_head_sha=HEAD, base_tip_sha=BASE
        ),
        base_ref="main",
    )
    outcome = outcome_of(report, request, prefix="p/", full_url=URL)
    CheckRunOutput(title=outcome.title, summary=outcome.summary, text=outcome.text)
    assert len(outcome.summary.encode()) <= OUTPUT_LIMIT
    assert_valid(outcome.summary, OUTPUT_LIMIT)
    assert "<details>" not in outcome.summary and "&lt;details&gt;" in outcome.summary

"""The structured diff of a deployment (`jobs/<deployment-id>/diff.json`), for the job page
and the JSON API: built once from a `RenderDiff` when the worker diffs, so readers never
diff again.

Like `diff.md` beside it, it is made from the redacted renders only. Per resource (= output
file): its path, kind / name / namespace when the file says them, added / removed / changed,
line counts, the pointers of redacted values that changed (never the values), and the unified
hunks. A hunk's lines keep their one-character prefix (`" "`, `"-"`, `"+"`, or `"\\"` for
"No newline at end of file"), which keeps a 5 MB diff about 5 MB of JSON.

`unified_rows` and `split_rows` turn a hunk into table rows with line numbers, in one pass
(side by side pairs each run of removed lines with the run of added lines that follows it);
`changed_parts` marks the characters that changed within such a pair.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from shared.review.diff import Change, FileDiff, RenderDiff

SCHEMA = 1
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_KIND = re.compile(r"^kind:[ \t]*['\"]?([^'\"\s#]+)", re.MULTILINE)
_METADATA = re.compile(r"^metadata:[ \t]*\n((?:[ \t]+.*\n|[ \t]*\n)*)", re.MULTILINE)
_FIELD = re.compile(r"^( +)(name|namespace):[ \t]*['\"]?([^'\"\s#]+)", re.MULTILINE)
# Only the start of a file is searched for kind and metadata: a resource says them first.
_HEAD_BYTES = 64 * 1024


def document_key(deployment_id: str) -> str:
    """Where a deployment's structured diff lives in the blob store."""
    return f"jobs/{deployment_id}/diff.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Hunk(_Model):
    header: str  # "@@ -1,4 +1,5 @@"
    old_start: int
    new_start: int
    lines: list[str]  # each with its prefix: " ", "-", "+" or "\\"


class ResourceDiff(_Model):
    path: str
    status: Change
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    additions: int = 0
    deletions: int = 0
    hidden: list[str] = Field(default_factory=list)  # JSON pointers; "" = somewhere in the file
    hunks: list[Hunk] = Field(default_factory=list)

    @property
    def title(self) -> str:
        """`Kind namespace/name` when known, else the path."""
        if not (self.kind and self.name):
            return self.path
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class DiffDocument(_Model):
    schema_: int = Field(default=SCHEMA, alias="schema")
    added: int = 0
    removed: int = 0
    changed: int = 0
    resources: list[ResourceDiff] = Field(default_factory=list)

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    @property
    def additions(self) -> int:
        return sum(r.additions for r in self.resources)

    @property
    def deletions(self) -> int:
        return sum(r.deletions for r in self.resources)

    def to_json(self) -> bytes:
        return self.model_dump_json(by_alias=True).encode()


def diff_document(
    diff: RenderDiff,
    old: Mapping[str, bytes] | None,
    new: Mapping[str, bytes],
) -> DiffDocument:
    """The document of `diff`, with kind / name / namespace read from the files it compares
    (the new side's file, or the old one's for a removed resource)."""
    resources = [
        _resource(item, new.get(item.path) or (old or {}).get(item.path) or b"")
        for item in diff.files
    ]
    return DiffDocument(
        added=diff.added, removed=diff.removed, changed=diff.changed, resources=resources
    )


def _resource(item: FileDiff, content: bytes) -> ResourceDiff:
    hunks = parse_hunks(item.unified)
    additions = deletions = 0
    for hunk in hunks:
        for line in hunk.lines:
            if line.startswith("+"):
                additions += 1
            elif line.startswith("-"):
                deletions += 1
    kind, name, namespace = identify(content)
    return ResourceDiff(
        path=item.path,
        status=item.change,
        kind=kind,
        name=name,
        namespace=namespace,
        additions=additions,
        deletions=deletions,
        hidden=list(item.hidden),
        hunks=hunks,
    )


def parse_hunks(unified: str) -> list[Hunk]:
    """The hunks of one file's unified diff (its `---`/`+++` header lines skipped)."""
    hunks: list[Hunk] = []
    for line in unified.splitlines():
        match = _HUNK.match(line)
        if match:
            # model_construct: the parts are already the right types, and it keeps the list
            # (validating would copy it, and this runs for every line of a large diff)
            hunks.append(
                Hunk.model_construct(
                    header=line,
                    old_start=int(match.group(1)),
                    new_start=int(match.group(3)),
                    lines=[],
                )
            )
        elif hunks:
            hunks[-1].lines.append(line)
    return hunks


def identify(content: bytes) -> tuple[str | None, str | None, str | None]:
    """(kind, name, namespace) of the first document of a manifest, when it states them at
    the usual places (top-level `kind:`, `metadata.name`, `metadata.namespace`)."""
    text = content[:_HEAD_BYTES].decode("utf-8", errors="replace")
    kind_match = _KIND.search(text)
    kind = kind_match.group(1) if kind_match else None
    name = namespace = None
    metadata = _METADATA.search(text)
    if metadata:
        block = metadata.group(1)
        first = next((line for line in block.splitlines() if line.strip()), "")
        indent = first[: len(first) - len(first.lstrip(" "))]
        for match in _FIELD.finditer(block):
            spaces, key, value = match.groups()
            if spaces != indent:  # only direct children of metadata (labels have names too)
                continue
            if key == "name" and name is None:
                name = value
            elif key == "namespace" and namespace is None:
                namespace = value
    return kind, name, namespace


# --- rows for the page ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """One table row: `kind` is "ctx", "add", "del", "note" (no newline) or "gap"."""

    kind: str
    old_no: int | None
    new_no: int | None
    text: str


@dataclass(frozen=True, slots=True)
class SplitRow:
    """One side-by-side row; either side may be empty (None)."""

    left: Row | None
    right: Row | None


def unified_rows(hunk: Hunk) -> Iterator[Row]:
    old_no, new_no = hunk.old_start, hunk.new_start
    for line in hunk.lines:
        prefix, text = line[:1], line[1:]
        if prefix == "+":
            yield Row("add", None, new_no, text)
            new_no += 1
        elif prefix == "-":
            yield Row("del", old_no, None, text)
            old_no += 1
        elif prefix == "\\":
            yield Row("note", None, None, line)
        else:
            yield Row("ctx", old_no, new_no, text)
            old_no += 1
            new_no += 1


def split_rows(hunk: Hunk) -> Iterator[SplitRow]:
    removed: list[Row] = []
    added: list[Row] = []

    def flush() -> Iterator[SplitRow]:
        for index in range(max(len(removed), len(added))):
            yield SplitRow(
                removed[index] if index < len(removed) else None,
                added[index] if index < len(added) else None,
            )
        removed.clear()
        added.clear()

    for row in unified_rows(hunk):
        if row.kind == "del":
            if added:  # a removal after additions starts a new pair of runs
                yield from flush()
            removed.append(row)
        elif row.kind == "add":
            added.append(row)
        else:
            yield from flush()
            yield SplitRow(row, row)
    yield from flush()


# A pair of lines is highlighted within only when it is short enough to compare cheaply and
# alike enough that what changed is a part of it (otherwise the whole line is the change).
INTRALINE_MAX = 2000
INTRALINE_RATIO = 0.5


def changed_parts(old: str, new: str) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """The removed and the added line of a side-by-side row as (text, changed) parts: the
    characters that differ between them are `changed` (the page marks them). Lines too long
    or too different are one unchanged part each."""
    whole = [(old, False)], [(new, False)]
    if not old or not new or max(len(old), len(new)) > INTRALINE_MAX:
        return whole
    # compared word by word (a word, a run of spaces, or one other character), so `eu` →
    # `us` marks the value, not the letters the two happen to share
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.ratio() < INTRALINE_RATIO:
        return whole
    left: list[tuple[str, bool]] = []
    right: list[tuple[str, bool]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        _extend(left, "".join(a[i1:i2]), tag != "equal")
        _extend(right, "".join(b[j1:j2]), tag != "equal")
    return left, right


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def _extend(parts: list[tuple[str, bool]], text: str, changed: bool) -> None:
    if not text:
        return
    if parts and parts[-1][1] == changed:
        parts[-1] = (parts[-1][0] + text, changed)
    else:
        parts.append((text, changed))

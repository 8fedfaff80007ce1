"""Suggestions for error messages: the known name closest to a misspelt one ("did you mean").

One rule everywhere (keys, templates, releases, roots): a candidate that differs only in case;
else one within a typing slip (one letter added, dropped, changed or two swapped: `imgae` →
`image`, `tga` → `tag`; two slips for names of eight letters or more); else the most alike at
75% or more by `difflib`'s ratio (`targetRevison` → `targetRevision`). Nothing is suggested
when nothing is that close, so a hint is never a guess between unrelated names.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CUTOFF = 0.75


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate `word` was most likely meant to be, or None."""
    known = sorted({c for c in candidates if c != word})
    if not known:
        return None
    folded = {c.lower(): c for c in known}
    if word.lower() in folded:
        return folded[word.lower()]
    slips = 2 if len(word) >= 8 else 1
    near = [(distance(word, c), c) for c in known if abs(len(c) - len(word)) <= slips]
    near = [(d, c) for d, c in near if d <= slips]
    if near and len(word) >= 3:
        return min(near)[1]
    found = difflib.get_close_matches(word, known, n=1, cutoff=CUTOFF)
    return found[0] if found else None


def hint(word: str, candidates: Iterable[str]) -> str:
    """` (did you mean 'x'?)`, or "" when nothing is close."""
    found = closest(word, candidates)
    return f" (did you mean {found!r}?)" if found is not None else ""


def distance(a: str, b: str) -> int:
    """Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`."""
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][len(b)]

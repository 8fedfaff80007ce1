"""What kube-renderer before 0.1.20 did differently from 0.1.20 besides its gomplate pre-render
(shared.engine.helmfile.prerender), for a repository read as an earlier version (detected
before 0.1.17, or pinned): reproduced where it is a default, refused where it is not
reproduced, so that such a repository never renders as 0.1.20 would.

- before 0.1.14 Helm renders every release's CRDs, hooks and tests (no `--no-hooks`, no
  `--skip-tests`); 0.1.14 skips hooks unless `flags.hooks`, and with them renders tests;
  `--skip-tests` unless `flags.tests` is 0.1.15's. The merge keeps empty documents before
  0.1.4 and deletes a `---` after a Source line from 0.1.19 on only (where either matters, the
  release is refused). Where the versions of a reading render a release differently, it is
  refused (`variants`, compared by the layout);
- before 0.1.20 a release disabled by its `condition` makes kube-renderer abort (refused);
- before 0.1.9 the options are in a root `kube-renderer.yaml` (refused); 0.1.9 to 0.1.13 read
  the generator, its pattern and the post-renderer from `.kube-renderer` as 0.1.20 does, and
  the others otherwise or not at all (`flags` as a list, `target_release` appending into its
  target's file, no `target_dir` / `helmfile_dir`): those are refused;
- up to 0.1.16 one generator serves the whole run (the options of the release its loop read
  last), and the yq generator appends the documents in the order of their file names
  (`0 1 10 2`, reproduced); `comment` and `bootstrap_template` are 0.1.17's; `remove_labels`
  is 0.1.15's (pod templates 0.1.16's); the yq default path's `/crds` `/tests` `/hooks`
  `/rbac` are 0.1.16's (`yq_segments`; a document they would name differently is refused);
- 0.1.3 to 0.1.16 render a root `bootstrap.yaml` per release (not reproduced).
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.engine.errors import FleetError
from shared.engine.helmfile import helmout, options
from shared.engine.helmfile.options import Options
from shared.engine.helmfile.prerender import SETTING, Era, Reading
from shared.engine.helmfile.states import Release, State
from shared.engine.tree import Tree
from shared.engine.values import deep_merge

# The options 0.1.9 to 0.1.13 read from helmfile values as 0.1.20 does.
SINCE_0_1_9 = frozenset(
    {"render_filename_generator", "render_filename_pattern", "helm_postrenderer"}
)


@dataclass(frozen=True)
class Planned:
    """What the checks read of one enabled release."""

    release: Release
    state: State
    options: Options


def check(tree: Tree, reading: Reading, planned: list[Planned], states: list[State]) -> None:
    """Refuse what the reading's versions would render differently from 0.1.20's steps."""
    top = states[-1]
    era = reading.era
    if not reading.legacy:
        return
    doing = reading.context()

    # a pinned version is the user's word; a detected one may be the wrong guess of a range
    hint = "" if reading.pinned else f"; set {SETTING} if it is for another version"

    def refuse(message: str, path: str, line: int | None = None) -> FleetError:
        return FleetError(f"{doing}: {message}{hint}", path=path, line=line)

    if era.first <= 16 and era.last >= 3 and tree.is_file("bootstrap.yaml"):
        raise refuse(
            f"kube-renderer {_span(era, 3, 16)} renders bootstrap.yaml for every release with "
            "gomplate; not reproduced",
            "bootstrap.yaml",
        )
    if options.section(top.values).get("bootstrap_template"):
        if era.first <= 16:
            raise refuse(
                f"{options.KEY}.bootstrap_template is kube-renderer 0.1.17's (earlier versions "
                "ignore it)",
                top.path,
            )
        bare = [r for s in states for r in s.releases if options.KEY not in r.listed]
        if era.first == 17 and bare:
            raise refuse(
                f"release {bare[0].name!r} sets no {options.KEY} values: kube-renderer 0.1.17's "
                "bootstrap template sees its values without the key (0.1.18 adds it); not "
                "reproduced",
                bare[0].state,
                bare[0].line,
            )
    if era.first < 9 and tree.is_file("kube-renderer.yaml"):
        raise refuse(
            f"kube-renderer {_span(era, 2, 8)} reads its options from kube-renderer.yaml; not "
            "reproduced",
            "kube-renderer.yaml",
        )
    enabled = {item.release.name for item in planned}
    for state in states:
        for release in state.releases:
            if release.name not in enabled and era.first < 20:
                raise refuse(
                    f"release {release.name!r} is disabled by its condition, which kube-renderer "
                    "before 0.1.20 does not read (it aborts on the release helmfile skips); not "
                    "reproduced",
                    release.state,
                    release.line,
                )
    for item in planned:
        release = item.release
        section = options.section(deep_merge(item.state.values, release.values))
        if era.first < 9 and section:
            raise refuse(
                f"release {release.name!r} sets {options.KEY} options, which kube-renderer "
                f"{_span(era, 2, 8)} does not read (its options are in kube-renderer.yaml)",
                release.state,
                release.line,
            )
        later = sorted(set(section) - SINCE_0_1_9) if era.first < 14 else []
        if later:
            raise refuse(
                f"release {release.name!r}: kube-renderer {_span(era, 9, 13)} reads "
                f"{options.KEY}.{later[0]} otherwise or not at all (flags are a list, "
                "target_release appends into its target's file, target_dir, helmfile_dir and "
                "remove_labels come later); not reproduced",
                release.state,
                release.line,
            )
        flags = section.get("flags")
        if era.first <= 14 and isinstance(flags, dict) and "tests" in flags:
            raise refuse(
                f"release {release.name!r}: {options.KEY}.flags.tests is kube-renderer 0.1.15's "
                "(0.1.14 renders tests with hooks)",
                release.state,
                release.line,
            )
        why = _unreproduced(item.options, era)
        if why:
            raise refuse(f"release {release.name!r}: {why}", release.state, release.line)
    generators = {(p.options.generator, p.options.pattern) for p in planned}
    if len(generators) > 1 and era.first <= 16:
        first = planned[0].release
        raise refuse(
            "the releases set different render_filename_generator / render_filename_pattern: "
            f"kube-renderer {era.versions} uses one for every release (the options of the one "
            "its loop reads last)",
            first.state,
            first.line,
        )


def _unreproduced(opts: Options, era: Era) -> str:
    if opts.generator == "comment" and era.first <= 16:
        return "the comment generator is kube-renderer 0.1.17's"
    if opts.remove_labels and era.first < 16:
        return "remove_labels is kube-renderer 0.1.15's, pod templates' labels 0.1.16's"
    return ""


def yq_segments(era: Era) -> tuple[bool, ...]:
    """Whether the yq default path has its `/crds`... segments, for the versions of the era."""
    return tuple(sorted({minor >= 16 for minor in range(era.first, era.last + 1)}))


def _span(era: Era, first: int, last: int) -> str:
    """The versions of `era` within first..last, as words."""
    lo, hi = max(era.first, first), min(era.last, last)
    return f"0.1.{lo}" if lo == hi else f"0.1.{lo} to 0.1.{hi}"


@dataclass(frozen=True)
class Steps:
    """How a version renders a release's stream: Helm's flags, whether the merge drops empty
    documents (0.1.4 on) and repairs a `---` after a Source line (0.1.19 on)."""

    flags: helmout.Flags
    drops_empty: bool = True
    repairs: bool = True


def variants(era: Era, opts: Options) -> list[Steps]:
    """The steps of each version of the era, without repeats (one element when they agree)."""
    out: list[Steps] = []
    for minor in range(era.first, era.last + 1):
        if minor < 14:
            flags = helmout.Flags(crds=True, hooks=True, tests=True)
        elif minor == 14:
            flags = helmout.Flags(crds=opts.crds, hooks=opts.hooks, tests=opts.hooks)
        else:
            flags = helmout.Flags(crds=opts.crds, hooks=opts.hooks, tests=opts.tests)
        steps = Steps(flags, drops_empty=minor >= 4, repairs=minor >= 19)
        if steps not in out:
            out.append(steps)
    return out

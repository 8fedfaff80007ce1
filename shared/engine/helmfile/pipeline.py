"""kube-renderer's steps on one release's stream, and its file name generators.

From Helm's output files of a release (`chartify`), kube-renderer 0.1.20:
1. merges them, sorted by path, through yq keeping the non-empty documents;
2. deletes a `---` line that directly follows a line holding `# Source: ` (CRD files that
   start with `---` would otherwise detach their Source comment);
3. runs the kustomize post-renderer, when set (its output replaces the stream);
4. deletes each `remove_labels` key from `metadata.labels` and
   `spec.template.metadata.labels` of every document (emptied maps stay, as `{}`);
5. writes the files of its generator: none (`<release>.yaml`, the stream), `yq` (a path per
   document, from a pattern), `comment` (the path a `# Kuberenderer: <path>` comment names),
   `helm` (the template path of the document's Source comment) or `kustomize` (kustomize's
   own file names). Documents that map to one file are appended to it.

Every step that kube-renderer does with yq is `yqdoc`'s reproduction of yq's bytes.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.engine import yamldoc
from shared.engine.errors import FleetError
from shared.engine.helmfile import yqdoc, yqexpr
from shared.engine.helmfile.chartify import kustomize
from shared.engine.helmfile.options import HELM_PLACEHOLDER, Options

_GROUP_BEFORE_SLASH = re.compile(r"(.*)/.*")
_API_GROUP = re.compile(r"^(?:(.*)/)?(?:v.*)\Z")


@dataclass(frozen=True)
class Where:
    """Where a release was declared, for errors."""

    release: str
    path: str
    line: int | None

    def error(self, message: str) -> FleetError:
        return FleetError(f"release {self.release!r}: {message}", path=self.path, line=self.line)


def _yq(where: Where, what: str, action: Callable[[], Any]) -> Any:
    try:
        return action()
    except yqdoc.NotReproduced as err:
        line = f" (line {err.line} of the {what})" if err.line else ""
        raise where.error(f"{err.message}{line}") from None
    except yqexpr.ExpressionError as err:
        raise where.error(f"render_filename_pattern: {err}") from None


def release_stream(
    files: dict[str, str],
    options: Options,
    where: Where,
    *,
    drops_empty: bool = True,
    repairs: bool = True,
) -> str:
    """Steps 1 to 4: the release's stream as the generator receives it. kube-renderer before
    0.1.19 does not `repair` (`repairs` False: refused where it would change the stream), and
    before 0.1.4 keeps empty documents (`drops_empty` False: refused when there is one); how
    the yq of those versions printed either is not reproduced."""

    def merged() -> str:
        docs: list[yqdoc.Document] = []
        for index, path in enumerate(sorted(files)):
            for doc in yqdoc.read(files[path], index):
                if yqdoc.length(doc.node):
                    docs.append(doc)
                elif not drops_empty:
                    raise where.error(
                        f"{path} holds an empty document, which kube-renderer before 0.1.4 "
                        "keeps; not reproduced"
                    )
        return yqdoc.print_documents(docs)

    text: str = _yq(where, "rendered stream", merged)
    repaired = repair(text)
    if not repairs and repaired != text:
        # which documents yq then printed the Source comment with depended on its version
        raise where.error(
            "a `---` line follows a Source line in its rendered stream (a file of its chart "
            "starting with `---`), which kube-renderer before 0.1.19 leaves to yq; not "
            "reproduced"
        )
    text = repaired
    if options.postrender is not None:
        text = postrender(text, options.postrender, where)
    if options.remove_labels:
        labels = options.remove_labels
        text = _yq(where, "rendered stream", lambda: _remove_labels(text, labels))
    return text


def repair(text: str) -> str:
    """sed `/# Source: .*/{n; /---/ {d;}}`: the line after a Source line goes when it holds
    `---` (the line read by `n` is not itself looked at as a Source line)."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        out.append(lines[i])
        i += 1
        if "# Source: " in out[-1] and i < len(lines):
            if "---" not in lines[i]:
                out.append(lines[i])
            i += 1
    return "\n".join(out)


def postrender(stream: str, data: str, where: Where) -> str:
    kustomization = yamldoc.loads(data, where.path)
    if not isinstance(kustomization, dict):
        raise where.error("helm_postrenderer.data must hold a Kustomization map")
    for key in ("bases", "components", "helmCharts", "generators"):
        if kustomization.get(key):
            raise where.error(f"helm_postrenderer.data: {key} is not supported (the stream only)")
    resources = kustomization.get("resources") or []
    if not isinstance(resources, list) or any(r != HELM_PLACEHOLDER for r in resources):
        raise where.error(
            f"helm_postrenderer.data: resources may list only {HELM_PLACEHOLDER} (other files "
            "are not in the rendered stream's directory)"
        )
    kustomization["resources"] = ["resources.yaml" for _ in resources]
    files = {"resources.yaml": stream, "kustomization.yaml": yamldoc.dumps(kustomization)}
    return kustomize(files, where.path)[""]


def _remove_labels(text: str, labels: tuple[str, ...]) -> str:
    """One yq in-place pass per label, as kube-renderer runs them."""
    for label in labels:
        docs = yqdoc.read(text)
        for doc in docs:
            yqdoc.delete(doc.node, ("metadata", "labels", label))
            yqdoc.delete(doc.node, ("spec", "template", "metadata", "labels", label))
        text = yqdoc.print_documents(docs)
    return text


# --- generators ------------------------------------------------------------------------------


def generate(
    stream: str,
    options: Options,
    where: Where,
    *,
    lexical: bool = False,
    segments: tuple[bool, ...] = (True,),
) -> dict[str, str]:
    """Step 5: the release's files, by path below its output directory. `lexical`: the yq
    generator appends documents in the order of their split files' names (`0 1 10 2`), as
    kube-renderer before 0.1.17 did (`sort -V` since). `segments`: whether the yq default
    path has its `/crds`... segments (0.1.16 on), for each version read; a document they
    name differently is refused."""
    if options.generator == "":
        return {f"{where.release}.yaml": stream}
    if options.generator == "kustomize":
        kustomization = (
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\n"
            "resources:\n- resources.yaml\n"
        )
        inputs = {"resources.yaml": stream, "kustomization.yaml": kustomization}
        return kustomize(inputs, where.path, split=True)
    files: dict[str, str] = _yq(
        where,
        "rendered stream",
        lambda: _split_generate(stream, options, where, lexical, segments),
    )
    return files


def _split_generate(
    stream: str,
    options: Options,
    where: Where,
    lexical: bool = False,
    segments: tuple[bool, ...] = (True,),
) -> dict[str, str]:
    out: dict[str, str] = {}
    docs = list(enumerate(yqdoc.read(stream)))
    if lexical and options.generator == "yq":
        docs.sort(key=lambda item: f"{item[0]}.yaml")
    for index, doc in docs:
        piece = split_text(doc)
        if options.generator == "helm":
            path = _source_path(piece)
            if not path:
                out[f"{index}.yaml"] = piece
                continue
        else:
            reread = yqdoc.read(piece)[0]
            paths = {_pattern_path(reread, options, with_segments) for with_segments in segments}
            if len(paths) > 1:
                raise where.error(
                    f"the yq generator's default path of {' and '.join(sorted(paths))} differs "
                    "between the kube-renderer versions read (its /crds, /tests, /hooks and "
                    "/rbac are 0.1.16's)"
                )
            path = paths.pop()
        name = _inside(path, where, doc)
        out[name] = append(out.get(name, ""), piece)
    return out


def split_text(doc: yqdoc.Document) -> str:
    """The file `yq -N -s` writes for one document."""
    leading = "".join(
        "" if yqdoc.SEPARATOR in line else line if line.endswith("\n") else line + "\n"
        for line in doc.leading.splitlines(keepends=True)
    )
    return leading + yqdoc.encode(doc)


def append(existing: str, piece: str) -> str:
    """`yq eval -i '.' FILE PIECE`: the file's documents, then the piece's."""
    docs = yqdoc.read(existing, 0) + yqdoc.read(piece, 1)
    return yqdoc.print_documents(docs)


def _source_path(piece: str) -> str:
    for line in piece.split("\n"):
        if "# Source" in line:
            return line.replace("# Source: ", "", 1)
    return ""


def _pattern_path(doc: yqdoc.Document, options: Options, segments: bool = True) -> str:
    if options.pattern:
        return yqexpr.evaluate(options.pattern, doc)
    if options.generator == "comment":
        return labelled(yqdoc.head_comment(doc), "Kuberenderer")
    return default_path(yqdoc.data(doc.node), segments=segments)


def labelled(comment: str, label: str) -> str:
    """yq's `capture("(?sm)^.*^<label>: (?P<path>.*?$).*$") | .path` on a head comment:
    the rest of the last line that starts with `<label>: ` ("" when none does)."""
    found = re.search(rf"^.*^{re.escape(label)}: (?P<path>.*?)$.*$", comment, re.S | re.M)
    return found.group("path") if found else ""


def _inside(path: str, where: Where, doc: yqdoc.Document) -> str:
    """The generator's path as a file below the release's directory."""
    what = yqdoc.data(doc.node)
    name = what.get("metadata", {}).get("name") if isinstance(what, dict) else None
    named = f"{what.get('kind')} {name!r}" if isinstance(what, dict) else "a document"
    if not path.strip():
        hint = " (it has no `# Kuberenderer: <path>` comment)" if "\n" not in path else ""
        raise where.error(f"{named} gets no file name from its generator{hint}")
    clean = posixpath.normpath(path.lstrip("/"))
    if clean in (".", "") or clean == ".." or clean.startswith("../") or path.endswith("/"):
        raise where.error(f"{named}: file name {path!r} is not a file below the release directory")
    return clean


def _alt(value: Any, default: Any) -> Any:
    """yq's `//`: the default on null and false."""
    return default if value is None or value is False else value


def _text(value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str):
        raise yqexpr.ExpressionError(f"{what} is not text")
    return value


def _get(doc: Any, *keys: str) -> Any:
    for key in keys:
        if doc is None:
            return None
        if not isinstance(doc, dict):
            raise yqexpr.ExpressionError(f"cannot read {'.'.join(keys)} of this document")
        doc = doc.get(key)
    return doc


def default_path(doc: Any, *, segments: bool = True) -> str:
    """kube-renderer's built-in yq file name: `<namespace or _cluster>[/crds][/tests]
    [/hooks][/rbac]/<Kind>[.<group>]_<name>.yaml` (docs/formats/helmfile.md); without
    `segments` (before 0.1.16) `<namespace or _cluster>/<Kind>[.<group>]_<name>.yaml`."""
    kind = _text(_alt(_get(doc, "kind"), ""), "kind")
    api = _text(_alt(_get(doc, "apiVersion"), ""), "apiVersion")
    group = _GROUP_BEFORE_SLASH.sub(r"\1", api)
    hook = _text(_alt(_get(doc, "metadata", "annotations", "helm.sh/hook"), ""), "helm.sh/hook")
    argo = _alt(_get(doc, "metadata", "annotations", "argocd.argoproj.io/hook"), "")
    argo = _text(argo, "argocd.argoproj.io/hook")
    crds = kind == "CustomResourceDefinition" and re.fullmatch(r"apiextensions.k8s.io", group)
    rbac = kind in ("ClusterRole", "ClusterRoleBinding") and re.fullmatch(
        r"rbac.authorization.k8s.io", group
    )
    dirs = (
        ("/crds" if crds else "")
        + ("/tests" if hook == "test" else "")
        + ("/hooks" if (hook + argo).replace("test", "") else "")
        + ("/rbac" if rbac else "")
    )
    namespace = _text(_alt(_get(doc, "metadata", "namespace"), "_cluster"), "namespace")
    version = _text(_alt(_get(doc, "apiVersion"), "v1"), "apiVersion")
    found = _API_GROUP.match(version)
    grouppart = "." + ((found.group(1) or "") if found else version)
    kindpart = _text(_alt(_get(doc, "kind"), "_unknown"), "kind")
    name = _text(_alt(_get(doc, "metadata", "name"), "_unknown"), "name")
    if not segments:
        dirs = ""
    return f"{namespace}{dirs}/{kindpart}{'' if grouppart == '.' else grouppart}_{name}.yaml"

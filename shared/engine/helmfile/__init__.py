"""The helmfile layout: repositories laid out for kube-renderer (a helmfile.yaml whose
releases kube-renderer renders into one directory each), rendered as kube-renderer v0.1.20
renders them, byte for byte.

Modules, in import order: `yqdoc` (YAML documents as yq v4 reads and writes them), `yqexpr`
(the yq expressions of file name patterns), `options` (kube-renderer's `.kube-renderer`
options), `states` (helmfile state files: templating, environments, bases, sub-helmfiles,
releases), `helmout` (Helm's `--output-dir` files), `chartify` (what a release's chart
renders: charts, plain manifest directories, kustomizations, transformers), `pipeline`
(kube-renderer's steps on one release's stream and its file name generators), `gomplate`
(gomplate templates on Helm's engine), `bootstrap` (kube-renderer's bootstrap files) and
`layout` (output directories as roots: the `Layout` the engine sees). The format is
docs/formats/helmfile.md.
"""

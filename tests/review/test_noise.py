"""Noise rules: which changed resources a preview hides, and which it must show."""

from __future__ import annotations

import pytest
import yaml

from shared.engine.config.fleet import FleetConfig
from shared.engine.config.parsing import parse_model
from shared.engine.errors import FleetErrors
from shared.review.diff import RenderFiles, diff_renders
from shared.review.noise import DEFAULT_RULES, NoiseFilter, NoiseRule

DEFAULTS = NoiseFilter(DEFAULT_RULES)


def deployment(image: str = "web:1", chart: str = "web-1", checksum: str = "aaa") -> bytes:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    helm.sh/chart: {chart}
    app.kubernetes.io/version: "1"
spec:
  template:
    metadata:
      annotations:
        checksum/config: {checksum}
    spec:
      containers:
      - name: web
        image: {image}
""".encode()


def split(
    rules: NoiseFilter, old: dict[str, bytes], new: dict[str, bytes]
) -> tuple[list[str], dict[str, tuple[str, ...]]]:
    shown, hidden = rules.split(diff_renders(old, new), old, new)
    return [f.path for f in shown.files], {h.path: h.pointers for h in hidden}


def test_defaults_hide_chart_labels_and_checksums() -> None:
    old = {"d.yaml": deployment()}
    new = {"d.yaml": deployment(chart="web-2", checksum="bbb")}
    assert split(DEFAULTS, old, new) == (
        [],
        {
            "d.yaml": (
                "/0/metadata/labels/helm.sh~1chart",
                "/0/spec/template/metadata/annotations/checksum~1config",
            )
        },
    )


def test_any_real_difference_shows_the_whole_resource() -> None:
    old = {"d.yaml": deployment()}
    new = {"d.yaml": deployment(image="web:2", chart="web-2")}
    shown, hidden = split(DEFAULTS, old, new)
    assert shown == ["d.yaml"] and hidden == {}


def test_added_removed_and_non_yaml_files_are_never_noise() -> None:
    old = {"gone.yaml": deployment(), "notes.txt": b"helm.sh/chart: a\n"}
    new = {"new.yaml": deployment(), "notes.txt": b"helm.sh/chart: b\n"}
    assert split(DEFAULTS, old, new) == (["gone.yaml", "new.yaml", "notes.txt"], {})


def test_reordering_without_a_value_change_is_shown() -> None:
    old = {"c.yaml": b"kind: ConfigMap\ndata:\n  a: '1'\n  b: '2'\n"}
    new = {"c.yaml": b"kind: ConfigMap\ndata:\n  b: '2'\n  a: '1'\n"}
    assert split(DEFAULTS, old, new) == (["c.yaml"], {})


def test_ca_bundle_anywhere_and_labels_only_under_metadata() -> None:
    webhook = b"kind: ValidatingWebhookConfiguration\nwebhooks:\n- clientConfig:\n    caBundle: "
    old = {
        "w.yaml": webhook + b"A\n",
        "s.yaml": b"kind: Service\nspec:\n  selector:\n    helm.sh/chart: a\n",
    }
    new = {
        "w.yaml": webhook + b"B\n",
        "s.yaml": b"kind: Service\nspec:\n  selector:\n    helm.sh/chart: b\n",
    }
    assert split(DEFAULTS, old, new) == (
        ["s.yaml"],  # a selector is not a label: it changes what the Service selects
        {"w.yaml": ("/0/webhooks/0/clientConfig/caBundle",)},
    )


def test_multi_document_files_compare_document_by_document() -> None:
    one = b"kind: ConfigMap\nmetadata:\n  labels:\n    helm.sh/chart: a\n"
    two = b"kind: ConfigMap\nmetadata:\n  labels:\n    helm.sh/chart: b\n"
    old = {"m.yaml": one + b"---\n" + one}
    assert split(DEFAULTS, old, {"m.yaml": one + b"---\n" + two})[1] == {
        "m.yaml": ("/1/metadata/labels/helm.sh~1chart",)
    }
    assert split(DEFAULTS, old, {"m.yaml": one})[0] == ["m.yaml"]  # a document less


def test_pointer_rules_with_globs_and_kinds() -> None:
    rules = NoiseFilter([NoiseRule("pointer", "/spec/*/replicas", ("Deploy*",))])
    old = {
        "d.yaml": b"kind: Deployment\nspec:\n  x:\n    replicas: 1\n",
        "s.yaml": b"kind: StatefulSet\nspec:\n  x:\n    replicas: 1\n",
    }
    new = {
        "d.yaml": b"kind: Deployment\nspec:\n  x:\n    replicas: 2\n",
        "s.yaml": b"kind: StatefulSet\nspec:\n  x:\n    replicas: 2\n",
    }
    assert split(rules, old, new) == (["s.yaml"], {"d.yaml": ("/0/spec/x/replicas",)})


def test_redacted_changes_are_noise_only_where_noise_lives() -> None:
    shown = b"kind: Deployment\nmetadata:\n  annotations:\n    checksum/secret: REDACTED\n"
    digests_a, digests_b = {"d.yaml": "sha256:1"}, {"d.yaml": "sha256:2"}
    pointer = "/0/metadata/annotations/checksum~1secret"
    old = RenderFiles({"d.yaml": shown}, digests_a, {"d.yaml": {pointer: "x"}})
    new = RenderFiles({"d.yaml": shown}, digests_b, {"d.yaml": {pointer: "y"}})
    diff = diff_renders(old, new)
    kept, hidden = DEFAULTS.split(diff, dict(old.files), dict(new.files))
    assert kept.empty and hidden[0].pointers == (pointer,)

    elsewhere = "/0/metadata/annotations/password"
    old = RenderFiles({"d.yaml": shown}, digests_a, {"d.yaml": {elsewhere: "x"}})
    new = RenderFiles({"d.yaml": shown}, digests_b, {"d.yaml": {elsewhere: "y"}})
    kept, hidden = DEFAULTS.split(diff_renders(old, new), dict(old.files), dict(new.files))
    assert [f.hidden for f in kept.files] == [(elsewhere,)] and hidden == []


def test_settings_build_the_rules() -> None:
    config = FleetConfig.model_validate(
        {
            "preview": {
                "defaultNoise": False,
                "noise": [{"label": "team/*"}, {"key": "generation", "kinds": ["Job"]}],
            }
        }
    )
    assert NoiseFilter.from_settings(config.preview).rules == (
        NoiseRule("label", "team/*"),
        NoiseRule("key", "generation", ("Job",)),
    )
    assert NoiseFilter.from_settings(FleetConfig().preview).rules == DEFAULT_RULES


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("{}", "exactly one of label, annotation, key, pointer"),
        ("{label: a, pointer: /b}", "(got label, pointer)"),
        ("{pointer: spec/replicas}", "pointer must start with '/'"),
        ("{labels: a}", "unknown key 'preview/noise/0/labels'"),
    ],
)
def test_bad_rules_name_file_and_line(rule: str, message: str) -> None:
    text = f"layout: atlas\npreview:\n  noise:\n    - {rule}\n"
    with pytest.raises(FleetErrors) as err:
        parse_model(FleetConfig, yaml.safe_load(text), text=text, source="rollwright.yaml")
    assert message in str(err.value)
    assert str(err.value).startswith("rollwright.yaml:4:")

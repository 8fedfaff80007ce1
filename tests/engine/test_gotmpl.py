"""Go templates as helmfile renders them (shared/engine/helm/gotmpl.py), on the real Helm engine:
helmfile's functions with helmfile's signatures, its missingkey=error, byte-exact whitespace,
file functions confined to the repository, `exec` refused, errors naming file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.helm import gotmpl
from shared.engine.tree import WorkTree
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.atlas import echo, make_fleet, one_app
from tests.support.files import write_files

CONTEXT: dict[str, Any] = {
    "ageSecretKey": "AGE-SECRET-KEY-1",
    "a": {"b": {"c": 1}, "list": [1, 2]},
    "empty": "",
    "nothing": None,
}


@pytest.fixture
def host(tmp_path: Path) -> gotmpl.Host:
    write_files(
        tmp_path,
        {
            "templates/t/files/ca.pem": "-----BEGIN CERTIFICATE-----\nMII\n",
            "templates/t/files/sub/x.txt": "x",
            "deployments/secret.txt": "no",
        },
    )
    return gotmpl.Host(WorkTree(tmp_path), env={"CLUSTER_DOMAIN": "example.com", "EMPTY": ""})


def run(text: str, host: gotmpl.Host | None = None, context: dict[str, Any] | None = None) -> str:
    return gotmpl.render(
        text, CONTEXT if context is None else context, source="f.gotmpl", host=host
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the ATLAS starter's argocd values: helmfile's get with a default, in a block scalar
        (
            'keys.txt: |\n  {{ .Values | get "ageSecretKey" "No key specified" }}\n',
            "keys.txt: |\n  AGE-SECRET-KEY-1\n",
        ),
        ('{{ .Values | get "missing" "No key specified" }}\n', "No key specified\n"),
        ('{{ get "a.b.c" . }}|{{ . | get "a.b.zz" 7 }}\n', "1|7\n"),
        ('{{ getOrNil "a.zz" . | toJson }}|{{ getOrNil "a.b" . | toJson }}\n', 'null|{"c":1}\n'),
        ('{{ get "" "d" .a.b | toJson }}\n', '{"c":1}\n'),
        ("{{ .a | toYaml }}|\n", "b:\n  c: 1\nlist:\n- 1\n- 2\n|\n"),  # helmfile keeps "\n"
        ("{{ toYaml .a.list | indent 2 }}\n", "  - 1\n  - 2\n  \n"),
        ('{{ $m := setValueAtPath "a.b.c" 9 .Values }}{{ $m.a.b.c }}\n', "9\n"),
        ('{{ (fromYaml "x: 1\\nz: [a]").z | toJson }}\n', '["a"]\n'),
        ('{{ required "needed" .a.b.c }}\n', "1\n"),
        # a rewritten call before a closing trim marker keeps the space the marker needs
        ("a {{- toYaml .a.b -}} z\n", "ac: 1\nz\n"),
        ('{{- get "a.b.c" . -}}\n', "1"),
        ("trailing\n\n\n", "trailing\n\n\n"),
        ("no newline", "no newline"),
        ("{{- /* get readFile exec */ -}}\nx\n", "x\n"),
        ('{{ "get" }} {{ printf "%s" "exec" }}\n', "get exec\n"),
        (
            "{{ .a.list | len }}{{ range $i, $v := .a.list }} {{ $i }}={{ $v }}{{ end }}\n",
            "2 0=1 1=2\n",
        ),
    ],
)
def test_helmfile_functions_and_whitespace(text: str, expected: str) -> None:
    assert run(text) == expected


def test_file_functions_read_the_repository(host: gotmpl.Host) -> None:
    text = (
        'ca: |\n{{ readFile (printf "%s/templates/t/files/ca.pem" .atlas.cwd) | indent 2 }}'
        '{{ isFile "templates/t/files/ca.pem" }} {{ isDir "templates/t/files" }} '
        '{{ isFile "templates/t/nope" }}\n'
        '{{ readDir "templates/t/files" | toJson }} {{ listDir "templates/t/files" | toJson }}\n'
    )
    out = run(text, host, {**CONTEXT, "atlas": {"cwd": "."}})
    assert out == (
        "ca: |\n  -----BEGIN CERTIFICATE-----\n  MII\n  true true false\n"
        '["templates/t/files/ca.pem"] ["templates/t/files/ca.pem","templates/t/files/sub"]\n'
    )


def test_env_is_what_rollwright_yaml_declares(host: gotmpl.Host) -> None:
    assert run('{{ env "CLUSTER_DOMAIN" }} {{ requiredEnv "CLUSTER_DOMAIN" }}\n', host) == (
        "example.com example.com\n"
    )


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('a: 1\n{{ exec "pwd" (list) }}\n', 2, "exec is refused: it would run commands"),
        ('a\nb\n{{ .Values | get "missing" }}\n', 3, 'get "missing": no value exists for key'),
        ("a\n{{ .nope }}\n", 2, "Go template error in {{ .nope }}: key 'nope' is not set"),
        ("{{ .emtpy }}", 1, "key 'emtpy' is not set (did you mean 'empty'?)"),
        ("{{ .Values.emtpy }}", 1, "key 'emtpy' is not set (did you mean 'empty'?)"),
        ("{{ .a | upperr }}", 1, "syntax error: unknown function 'upperr' (did you mean 'upper'?)"),
        ("{{ .a }", 1, 'Go template syntax error: unexpected "}" in operand (a "}}" with'),
        ("{{ if .a }}x", 1, "the file ends inside an action or block"),
        ("{{ .a.b.c.d }}", 1, "cannot read 'd': the value it is read from is not a map"),
        ("{{ .empty 3 }}", 1, "'empty' is a value, not a function: it takes no arguments"),
        ('{{ readFile "/etc/passwd" }}', 1, "absolute paths are not allowed"),
        ('x\n{{ readFile "../outside" }}', 2, "points outside the repository"),
        ('{{ readFile "deployments/secret.txt" }}', 1, "may not read files under deployments/"),
        ('{{ readFile "templates/t/none" }}', 1, "no file templates/t/none"),
        ('{{ env "HOME" }}', 1, "not declared in rollwright.yaml atlas.env"),
        ('{{ requiredEnv "EMPTY" }}', 1, "required env var `EMPTY` is not set"),
        ('{{ fetchSecretValue "ref+vault://secret/x" }}', 1, "only ref+sops:// references"),
        ('{{ fromYaml "x: [" }}', 1, "fromYaml:"),
        ('{{ get "a" "b" "c" . }}', 1, "get takes a path, an optional default and a value"),
        ("{{ .big }}", None, "the integer 1000000 would print as 1e+06"),
    ],
)
def test_errors_name_the_users_file_and_line(
    host: gotmpl.Host, text: str, line: int | None, message: str
) -> None:
    with pytest.raises(FleetError) as caught:
        run(text, host, {**CONTEXT, "big": 1000000})
    assert caught.value.path == "f.gotmpl"
    assert caught.value.line == line
    assert message in str(caught.value)
    assert "rollwright/templates" not in str(caught.value)


def test_rewriting_keeps_every_line_in_place() -> None:
    text = '{{ get\n  "a.b.c"\n  . }}\n{{ .nope }}\n'
    with pytest.raises(FleetError) as caught:
        run(text)
    assert caught.value.line == 4


def test_a_fleet_uses_helmfile_functions_in_every_kind_of_template(tmp_path: Path) -> None:
    dep = "deployments/g/c/apps/d"
    base = make_fleet(
        tmp_path,
        {
            "rollwright.yaml": {"atlas": {"env": {"REGION": "eu-west-1"}}},
            f"{dep}/deployment.yaml": one_app(),
            "deployments/global.values.yaml.gotmpl": 'region: {{ env "REGION" }}\n',
            "templates/echo/helmfile.yaml.gotmpl": (
                "releases:\n  - name: echo\n    chart: ./chart\n"
                "    values:\n      - v.yaml.gotmpl\n"
                '      - fromHelmfile: {{ .Values | get "region" "none" }}\n'
            ),
            "templates/echo/v.yaml.gotmpl": (
                'motd: {{ readFile "templates/echo/motd.txt" | quote }}\n'
                'fallback: {{ .Values | get "ageSecretKey" "No key specified" }}\n'
            ),
            "templates/echo/motd.txt": "hello\n",
        },
    )
    values = echo(base, "g/c")
    assert values["region"] == values["fromHelmfile"] == "eu-west-1"
    assert values["motd"] == "hello\n"
    assert values["fallback"] == "No key specified"


def test_fetch_secret_value_reads_sops_files_and_stays_redacted(
    tmp_path: Path,
    age_key: AgeKey,
) -> None:
    dep = "deployments/g/c/apps/d"
    base = make_fleet(
        tmp_path,
        {
            f"{dep}/deployment.yaml": one_app(),
            "templates/echo/creds.sops.yaml": encrypt_yaml(
                {"db": {"password": "fetched-secret-4471"}}, [age_key.recipient]
            ),
            "templates/echo/helmfile.yaml.gotmpl": (
                "releases:\n  - name: echo\n    chart: ./chart\n    values: [v.yaml.gotmpl]\n"
            ),
            "templates/echo/v.yaml.gotmpl": (
                'password: {{ fetchSecretValue "ref+sops://templates/echo/creds.sops.yaml#/db/password"'
                " | quote }}\n"
            ),
        },
    )
    fleet = Fleet.open(WorkTree(base))
    assert fleet.values("g/c", reveal=True)["password"] == "fetched-secret-4471"
    # what is shown never holds it: the perturbed run sees fetchSecretValue's origin too
    assert "fetched-secret-4471" not in json.dumps(fleet.values("g/c"))
    assert not any(b"fetched-secret-4471" in data for data in fleet.render("g/c").files.values())


def test_fetch_secret_value_in_an_app_template_is_refused(
    tmp_path: Path,
    age_key: AgeKey,
) -> None:
    base = make_fleet(
        tmp_path,
        {
            "deployments/g/c/apps/d/deployment.yaml": one_app(),
            "templates/echo/creds.sops.yaml": encrypt_yaml({"k": "v-9911"}, [age_key.recipient]),
            "templates/echo/helmfile.yaml.gotmpl": (
                "releases:\n  - name: echo\n    chart: ./chart\n    values:\n"
                '      - k: {{ fetchSecretValue "ref+sops://templates/echo/creds.sops.yaml#/k" }}\n'
            ),
        },
    )
    with pytest.raises(FleetError, match="fetchSecretValue in an app template is not supported"):
        Fleet.open(WorkTree(base)).releases("g/c")

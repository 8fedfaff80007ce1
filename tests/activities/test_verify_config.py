"""`verify:` in rollwright.yaml: its validation, and the plan a root gets from it (templates
filled in, the first matching rule, the token named and never present)."""

from __future__ import annotations

import pytest
import yaml

from activities.verify import plan_for
from shared.contracts.deploy import RepoRef
from shared.contracts.verify import VerifyPlanRequest
from shared.engine.config.fleet import FleetConfig
from shared.engine.config.parsing import parse_model
from shared.engine.errors import FleetErrors

REPO = RepoRef(owner="acme", name="fleet")
TEXT = """publish:
  target: git
verify:
  - roots: ["prod/*"]
    timeout: 20m
    argocd:
      server: https://argocd.example.com/
      selector: "rollwright.dev/root={root}"
    http:
      url: "https://check.example.com/{root}?rev={revision}&commit={commit}"
      status: 204
  - argocd:
      server: https://argocd.example.com
      tokenEnv: OTHER_TOKEN
      applications: "{root}-*"
"""


def load(text: str) -> FleetConfig:
    return parse_model(FleetConfig, yaml.safe_load(text), text=text, source="rollwright.yaml")


def request(root: str) -> VerifyPlanRequest:
    return VerifyPlanRequest(
        repo=REPO, root=root, revision="a" * 40, deployment_id="d", commit="c" * 40
    )


def test_the_first_matching_rule_is_planned_with_its_templates_filled_in() -> None:
    config = load(TEXT)
    plan = plan_for(config, request("prod/eu-west"))
    assert plan is not None and plan.argocd is not None and plan.http is not None
    assert plan.timeout_seconds == 1200 and plan.interval_seconds == 10
    assert plan.argocd.server == "https://argocd.example.com"
    assert plan.argocd.selector == "rollwright.dev/root=prod-eu-west"
    assert plan.argocd.token_env == "ARGOCD_TOKEN"
    assert (
        plan.http.url == f"https://check.example.com/prod/eu-west?rev={'a' * 40}&commit={'c' * 40}"
    )
    assert plan.http.status == 204
    # the published branch is the fleet repo's: later commits on it can be checked
    assert plan.source is not None and plan.source.path == "prod/eu-west/"
    assert plan.source.repo.full_name == "acme/fleet"
    elsewhere = config.model_copy(
        update={
            "publish": config.publish.model_copy(
                update={
                    "git": config.publish.git.model_copy(
                        update={"repository": "https://git.example.com/pub.git"}
                    )
                }
            )
        }
    )
    # a URL target is not read with the App's token: only the exact commit counts there
    other_plan = plan_for(elsewhere, request("prod/eu-west"))
    assert other_plan is not None and other_plan.source is None
    other = plan_for(config, request("dev/a"))
    assert other is not None and other.argocd is not None and other.http is None
    assert other.argocd.applications == "dev-a-*" and other.argocd.token_env == "OTHER_TOKEN"
    assert other.timeout_seconds == 900  # the default 15 minutes
    assert "OTHER_TOKEN" not in other.describe() and "dev-a-*" in other.describe()


def test_no_rule_no_plan() -> None:
    config = load("verify:\n  - roots: [prod/*]\n    http: {url: 'https://x/{root}'}\n")
    assert plan_for(config, request("dev/a")) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "verify:\n  - argocd: {server: https://a, selector: x}\n",
            "verify rules with argocd need publish.target git",
        ),
        (
            "publish: {target: git}\nverify:\n  - argocd: {server: https://a}\n",
            "argocd needs exactly one of applications and selector",
        ),
        ("verify:\n  - roots: ['*']\n", "a verify rule needs argocd, http or both"),
        ("verify:\n  - http: {url: 'https://x'}\n    timeout: soon\n", "verify/0/timeout"),
        (
            "verify:\n  - http: {url: 'https://x'}\n    argocd: {server: https://a, "
            "selector: x, token: abc}\n",
            "unknown key 'verify/0/argocd/token'",
        ),
        (
            "publish: {target: git}\nverify:\n  - argocd: {server: https://a, selector: x, "
            "tokenEnv: 'not a name'}\n",
            "verify/0/argocd/tokenEnv",
        ),
    ],
)
def test_mistakes_are_refused_with_the_key(text: str, message: str) -> None:
    with pytest.raises(FleetErrors) as err:
        load(text)
    assert message in str(err.value)

"""Promotion never shows a value that comes from a SOPS-encrypted values file: unmet-dependency
messages of `rollout status`, `promote`'s refusal, the workflow's evaluation (what its check
run and current details show), on the example fleet with a real sops file and a throwaway key."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from activities.promotion import evaluate
from shared.cli.main import main
from shared.engine.tree import GitTree, WorkTree
from shared.engine.validate import validate_fleet
from shared.promotion import plan as promotion
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.files import write_files
from tests.support.gitrepo import commit_all

PID = "hypershift-v4.18-rollout"
PROM = "config/management-cluster/prometheus"
# Encrypted at stage: a cert-manager revision too old for the patch (and not a version), and
# prometheus selfHeal turned off; both are dependencies of the example's patch.
SECRET_REVISION = "v1.12.0-s3cr3t-build"
SECRET_WORD = "hunter2-not-a-version"


def encrypt_stage(repo: Path, key: AgeKey, app: str, fields: dict[str, object]) -> None:
    text = encrypt_yaml({"applications": {app: fields}}, [key.recipient])
    write_files(repo, {f"config/management-cluster/{app}/stage/values.sops.yaml": text})
    commit_all(repo, f"encrypted {app} values at stage")


def shown_texts(repo: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Everything promotion would show about the stage step."""
    tree = WorkTree(repo)
    out = ["\n".join(promotion.check_dependencies(tree, PID, "stage"))]
    [status] = promotion.rollout_status(tree)
    out.append("\n".join(status.unmet_dependencies))
    ev = evaluate(GitTree(repo, "HEAD"), PID, datetime(2025, 1, 1, tzinfo=UTC))
    out.append(ev.model_dump_json())
    assert main(["rollout", "status", "--repo", str(repo)]) == 0
    assert main(["rollout", "status", "--format", "json", "--repo", str(repo)]) == 0
    assert main(["promote", PID, "--repo", str(repo)]) == 1
    captured = capsys.readouterr()
    out += [captured.out, captured.err]
    return out


def test_unmet_dependency_on_an_encrypted_string_is_not_shown(
    repo: Path,
    age_key: AgeKey,
    capsys: pytest.CaptureFixture[str],
) -> None:
    encrypt_stage(repo, age_key, "cert-manager", {"source": {"targetRevision": SECRET_REVISION}})
    texts = shown_texts(repo, capsys)
    joined = "\n".join(texts)
    assert "/cert-manager/source/targetRevision >=v1.13.0 is not met" in joined
    assert "comes from an encrypted file (not shown)" in joined
    assert SECRET_REVISION not in joined
    assert "s3cr3t" not in joined


def test_unmet_dependency_on_an_encrypted_non_version_is_not_shown(
    repo: Path,
    age_key: AgeKey,
    capsys: pytest.CaptureFixture[str],
) -> None:
    encrypt_stage(repo, age_key, "cert-manager", {"source": {"targetRevision": SECRET_WORD}})
    joined = "\n".join(shown_texts(repo, capsys))
    assert "comes from an encrypted file (not shown)" in joined
    assert "hunter2" not in joined


def test_unmet_dependency_on_an_encrypted_boolean_is_not_shown(
    repo: Path,
    age_key: AgeKey,
    capsys: pytest.CaptureFixture[str],
) -> None:
    encrypt_stage(repo, age_key, "prometheus", {"syncPolicy": {"automated": {"selfHeal": False}}})
    joined = "\n".join(shown_texts(repo, capsys))
    assert "/prometheus/syncPolicy/automated/selfHeal true is not met" in joined
    assert "found false" not in joined
    assert "comes from an encrypted file (not shown)" in joined


def test_validation_hides_an_encrypted_boolean_of_an_active_patch(
    repo: Path,
    age_key: AgeKey,
) -> None:
    # The patch is active under integration; its selfHeal dependency reads the encrypted file.
    text = encrypt_yaml(
        {"applications": {"prometheus": {"syncPolicy": {"automated": {"selfHeal": False}}}}},
        [age_key.recipient],
    )
    write_files(repo, {f"{PROM}/integration/values.sops.yaml": text})
    problems = [str(p) for p in validate_fleet(WorkTree(repo), render=False)]
    unmet = [p for p in problems if "selfHeal" in p]
    assert unmet and all("comes from an encrypted file (not shown)" in p for p in unmet)
    assert not any("found false" in p for p in problems)

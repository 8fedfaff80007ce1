"""What a rollout shows: the node table's states, halts, staleness, the check run's words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.contracts.deploy import RepoRef
from shared.contracts.promotion import (
    Evaluation,
    NodeInfo,
    NodeState,
    RolloutRow,
    RootDeployment,
    WindowInfo,
)
from workflows.rollout import (
    HALT,
    RECHECK,
    CheckRunWant,
    check_run_request,
    deployments_table,
    halt_reason,
    phase_of,
    retired_request,
    rollout_table,
    rows,
    stale,
    title,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(hours=2)
PLAN = [NodeInfo(path=p) for p in ("integration", "stage", "prod-eu", "prod-us")]


def evaluation(**fields: object) -> Evaluation:
    values: dict[str, object] = {
        "revision": "f" * 40,
        "plan": PLAN,
        "active_nodes": ["integration", "stage"],
        "current_node": "stage",
        "next_node": "prod-eu",
        "roots": ["stage/a", "stage/b"],
    }
    return Evaluation.model_validate(values | fields)


def table(
    ev: Evaluation, state: NodeState, *, old: list[RolloutRow] | None = None
) -> list[RolloutRow]:
    return rows(ev, state, "why", old=old or [], healthy=lambda r: r == "stage/a", now=T1)


def test_nodes_behind_are_passed_the_current_deploys_the_next_waits_the_rest_pend() -> None:
    got = table(evaluation(), "deploying")
    assert [(r.node, r.state, r.detail) for r in got] == [
        ("integration", "passed", ""),
        ("stage", "deploying", "1/2 roots"),
        ("prod-eu", "pending", ""),
        ("prod-us", "pending", ""),
    ]


def test_the_next_node_shows_its_gate_and_the_current_one_is_healthy() -> None:
    got = table(evaluation(), "awaiting_promote")
    assert [(r.node, r.state) for r in got][1:3] == [
        ("stage", "healthy"),
        ("prod-eu", "awaiting_promote"),
    ]
    halted = table(evaluation(), "halted")
    assert (halted[1].state, halted[1].detail, halted[2].state) == ("halted", "why", "pending")


def test_a_row_keeps_its_since_while_its_state_stays() -> None:
    old = [
        RolloutRow(node="integration", state="passed", since=T0),
        RolloutRow(node="stage", state="soaking", since=T0),
    ]
    got = table(evaluation(), "deploying", old=old)
    assert (got[0].since, got[1].since) == (T0, T1)


def test_phases_follow_the_current_rows_state() -> None:
    assert [phase_of(s) for s in ("deploying", "graduating", "window_closed")] == [
        "deploying",
        "promoting",
        "gate",
    ]


def test_a_halt_quotes_the_first_line_of_each_failure() -> None:
    failed = [
        RootDeployment(root="stage/a", revision="1" * 40, state="timed_out"),
        RootDeployment(root="stage/b", revision="2" * 40, state="unhealthy", message="503\n|t|"),
        RootDeployment(root="stage/c"),  # no deployment yet: nothing to say
    ]
    assert halt_reason(failed) == (
        f"`stage/a`: deployment of `{'1' * 12}` timed out; "
        f"`stage/b`: deployment of `{'2' * 12}` unhealthy (503)"
    )


def test_an_evaluation_is_stale_once_its_window_may_have_changed() -> None:
    assert stale(evaluation(), None, T0)
    assert not stale(evaluation(), T0, T0 + RECHECK - timedelta(seconds=1))
    assert stale(evaluation(), T0, T0 + RECHECK)
    closing = evaluation(window=WindowInfo(open=True, closes_at=T0 + timedelta(minutes=5)))
    assert not stale(closing, T0, T0 + timedelta(minutes=4))
    assert stale(closing, T0, T0 + timedelta(minutes=5))
    opening = evaluation(window=WindowInfo(open=False, next_open=T0 + timedelta(minutes=5)))
    assert stale(opening, T0, T0 + timedelta(minutes=5))


def test_the_tables_and_titles() -> None:
    assert rollout_table([]) == "Rollout: not evaluated yet."
    shown = rollout_table([RolloutRow(node="stage", state="window_closed", since=T0, detail="x")])
    assert shown.splitlines()[-1] == "| `stage` | window closed (x) | 2025-03-01 12:00 UTC |"
    deployed = {"stage/a": RootDeployment(root="stage/a", revision="1" * 40, contains_patch=True)}
    assert deployments_table(deployed).splitlines()[-1] == (
        f"| `stage/a` | none | `{'1' * 12}` | yes |"
    )
    assert deployments_table({}) == ""
    assert title("awaiting_promote", evaluation()) == "Promote to prod-eu?"
    assert title("halted", evaluation()) == "halted"


def test_the_rollout_check_run_and_its_retired_predecessor() -> None:
    repo = RepoRef(owner="acme", name="fleet", html_url="https://github.example/acme/fleet")
    want = CheckRunWant(("x",), "in_progress", None, "Deploying at stage", "Waiting.", [HALT])
    made = check_run_request(repo, "p-1", "f" * 40, want, check_run_id=None, summary="s")
    assert (made.name, made.head_sha, made.external_id, made.details_url) == (
        "rollwright/promote: p-1",
        "f" * 40,
        "promote:acme/fleet:p-1",
        "https://github.example/acme/fleet",
    )
    assert [a.identifier for a in made.actions] == ["halt"]
    old = retired_request(repo, "p-1", check_run_id=9, old_sha="e" * 40, tip="f" * 40)
    assert (old.check_run_id, old.head_sha, old.conclusion, old.actions) == (
        9,
        "e" * 40,
        "neutral",
        [],
    )
    assert old.title == f"Moved on to {'f' * 12}"

"""Promotion windows (shared/engine/config/windows.py) and the `rollout:` section of
rollwright.yaml."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.cli.main import main
from shared.engine.config.fleet import FleetConfig
from shared.engine.config.rollout import RolloutSettings
from shared.engine.config.windows import window_state
from shared.engine.errors import FleetErrors
from shared.engine.tree import WorkTree
from tests.support.files import copy_example

BERLIN = ZoneInfo("Europe/Berlin")


def rollout(windows: list[dict[str, Any]], **extra: Any) -> RolloutSettings:
    return RolloutSettings.model_validate({"windows": windows, **extra})


def berlin(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=BERLIN)


OFFICE_HOURS = rollout([{"allow": "0 9 * * 1-5", "duration": "8h", "timezone": "Europe/Berlin"}])


def test_no_windows_is_always_open() -> None:
    state = window_state(RolloutSettings(), "prod", datetime(2024, 1, 1, tzinfo=UTC))
    assert state.open and state.next_open is None and state.closes_at is None


def test_cron_allow_window_opens_and_closes_in_its_time_zone() -> None:
    inside = window_state(OFFICE_HOURS, "prod", berlin("2024-03-05T10:00"))  # a Tuesday
    assert inside.open
    assert inside.closes_at == berlin("2024-03-05T17:00")
    assert "inside the allow window '0 9 * * 1-5' (Europe/Berlin)" in inside.reason
    assert "closes at 2024-03-05 17:00 CET" in inside.reason

    evening = window_state(OFFICE_HOURS, "prod", berlin("2024-03-05T17:00"))
    assert not evening.open
    assert evening.next_open == berlin("2024-03-06T09:00")
    assert "outside every allow window; opens at 2024-03-06 09:00 CET" in evening.reason

    weekend = window_state(OFFICE_HOURS, "prod", berlin("2024-03-08T18:30"))  # Friday night
    assert weekend.next_open == berlin("2024-03-11T09:00")


def test_deny_beats_allow_and_nodes_select_rules() -> None:
    settings = rollout(
        [
            {"allow": "0 9 * * 1-5", "duration": "8h"},
            {
                "deny": "RRULE:FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=20",
                "duration": "14d",
                "nodes": ["prod*"],
            },
        ],
        timezone="Europe/Berlin",
    )
    christmas = berlin("2024-12-24T10:00")
    prod = window_state(settings, "prod/prod-canary", christmas)
    assert not prod.open
    assert "deny window 'RRULE:FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=20' (Europe/Berlin) is in " in (
        prod.reason
    )
    assert "until 2025-01-03 00:00 CET" in prod.reason
    # Jan 3 2025 is a Friday, but the allow window opens at 09:00 only.
    assert prod.next_open == berlin("2025-01-03T09:00")
    stage = window_state(settings, "stage", christmas)
    assert stage.open and stage.closes_at == berlin("2024-12-24T17:00")


def test_deny_only_rules_leave_the_rest_open() -> None:
    weekend_freeze = rollout(
        [{"deny": "RRULE:FREQ=WEEKLY;BYDAY=SA", "duration": "2d", "timezone": "Europe/Berlin"}]
    )
    friday = window_state(weekend_freeze, "stage", berlin("2024-03-08T12:00"))
    assert friday.open and friday.closes_at == berlin("2024-03-09T00:00")
    assert "no deny window in force" in friday.reason
    sunday = window_state(weekend_freeze, "stage", berlin("2024-03-10T12:00"))
    assert not sunday.open and sunday.next_open == berlin("2024-03-11T00:00")


def test_wall_clock_time_holds_across_dst() -> None:
    daily = rollout([{"allow": "0 9 * * *", "duration": "1h", "timezone": "Europe/Berlin"}])
    # Europe/Berlin springs forward on 2024-03-31: 09:00 is 08:00 UTC before, 07:00 after.
    before = window_state(daily, "x", datetime(2024, 3, 30, 8, 30, tzinfo=UTC))
    after = window_state(daily, "x", datetime(2024, 3, 31, 7, 30, tzinfo=UTC))
    assert before.open and after.open
    closed = window_state(daily, "x", datetime(2024, 3, 30, 12, 0, tzinfo=UTC))
    assert closed.next_open == datetime(2024, 3, 31, 7, 0, tzinfo=UTC)


def test_starts_in_a_dst_gap_move_forward_and_ambiguous_ones_take_the_first() -> None:
    night = rollout([{"allow": "30 2 * * *", "duration": "30m", "timezone": "Europe/Berlin"}])
    # 02:30 does not exist on 2024-03-31 in Berlin: the window starts at 03:30 CEST.
    spring = window_state(night, "x", datetime(2024, 3, 31, 0, 0, tzinfo=UTC))
    assert spring.next_open == datetime(2024, 3, 31, 1, 30, tzinfo=UTC)
    # 02:30 happens twice on 2024-10-27: the window starts at the first (02:30 CEST).
    autumn = window_state(night, "x", datetime(2024, 10, 27, 0, 0, tzinfo=UTC))
    assert autumn.next_open == datetime(2024, 10, 27, 0, 30, tzinfo=UTC)
    assert autumn.next_open is not None
    inside = window_state(night, "x", autumn.next_open + timedelta(minutes=10))
    assert inside.closes_at == datetime(2024, 10, 27, 1, 0, tzinfo=UTC)


def test_rrule_interval_counts_from_the_anchor() -> None:
    # Every other Monday from 2000-01-03 (a Monday): 2024-01-01 is 1252 weeks later (even).
    biweekly = rollout([{"allow": "RRULE:FREQ=WEEKLY;INTERVAL=2;BYHOUR=10", "duration": "2h"}])
    assert window_state(biweekly, "x", datetime(2024, 1, 1, 11, tzinfo=UTC)).open
    assert not window_state(biweekly, "x", datetime(2024, 1, 8, 11, tzinfo=UTC)).open
    state = window_state(biweekly, "x", datetime(2024, 1, 8, 11, tzinfo=UTC))
    assert state.next_open == datetime(2024, 1, 15, 10, tzinfo=UTC)


def test_a_window_that_never_opens_says_so() -> None:
    frozen = rollout([{"deny": "0 0 * * *", "duration": "2d"}])
    state = window_state(frozen, "x", datetime(2024, 1, 1, tzinfo=UTC))
    assert not state.open and state.next_open is None
    assert "does not open before" in state.reason


def test_naive_now_is_rejected() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        window_state(OFFICE_HOURS, "x", datetime(2024, 1, 1))


ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]


@settings(max_examples=150, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    hour=st.integers(0, 23),
    hours=st.integers(1, 23),
    now=st.datetimes(
        min_value=datetime(2023, 1, 1), max_value=datetime(2026, 12, 31), timezones=st.just(UTC)
    ),
)
def test_daily_window_matches_a_brute_force_oracle(
    zone: str, hour: int, hours: int, now: datetime
) -> None:
    """Open exactly when `now` lies in [hour:00 local, +duration) of some day; the reported
    instants are where the state really changes."""
    settings_ = rollout([{"allow": f"0 {hour} * * *", "duration": f"{hours}h", "timezone": zone}])
    tz = ZoneInfo(zone)
    local_day = now.astimezone(tz).date()
    starts = [
        datetime(d.year, d.month, d.day, hour).replace(tzinfo=tz).astimezone(UTC)
        for d in (local_day - timedelta(days=1), local_day)
    ]
    expected = any(s <= now < s + timedelta(hours=hours) for s in starts)
    state = window_state(settings_, "node", now)
    assert state.open == expected
    second = timedelta(seconds=1)
    if state.open:
        assert state.closes_at is not None and state.closes_at > now
        assert window_state(settings_, "node", state.closes_at - second).open
        assert not window_state(settings_, "node", state.closes_at).open
    else:
        assert state.next_open is not None and state.next_open > now
        assert state.next_open - now <= timedelta(days=1, hours=1)
        assert window_state(settings_, "node", state.next_open).open
        assert not window_state(settings_, "node", state.next_open - second).open


# --- rollwright.yaml ------------------------------------------------------------------------


def load_errors(tmp_path: Path, text: str) -> list[str]:
    (tmp_path / "rollwright.yaml").write_text(text)
    with pytest.raises(FleetErrors) as err:
        FleetConfig.load(WorkTree(tmp_path))
    return [str(p) for p in err.value.problems]


def test_rollout_section_parses(tmp_path: Path) -> None:
    (tmp_path / "rollwright.yaml").write_text(
        "rollout:\n"
        "  step: sector\n"
        "  soak: 1h30m\n"
        "  timezone: Europe/Berlin\n"
        "  windows:\n"
        "    - allow: '0 9 * * 1-4'\n"
        "      duration: 8h\n"
        "    - deny: 'RRULE:FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=20'\n"
        "      duration: 2w\n"
        "      timezone: America/New_York\n"
        "      nodes: ['prod*']\n"
    )
    config = FleetConfig.load(WorkTree(tmp_path)).rollout
    assert config.step == "sector" and config.soak_seconds == 5400
    assert [w.kind for w in config.windows] == ["allow", "deny"]
    assert config.windows[1].nodes == ["prod*"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "rollout:\n  windows:\n    - allow: '0 9 * *'\n      duration: 8h\n",
            "rollwright.yaml:3: rollout/windows/0: Value error, '0 9 * *' is neither a cron "
            "expression",
        ),
        (
            "rollout:\n  windows:\n    - allow: '0 25 * * *'\n      duration: 8h\n",
            "rollwright.yaml:3: rollout/windows/0: Value error, '0 25 * * *' is not a valid cron",
        ),
        (
            "rollout:\n  windows:\n    - deny: 'RRULE:FREQ=HOURLY'\n      duration: 1h\n",
            "rollwright.yaml:3: rollout/windows/0: Value error, 'RRULE:FREQ=HOURLY': FREQ must",
        ),
        (
            "rollout:\n  windows:\n    - deny: 'RRULE:FREQ=DAILY;BYHOUR=x'\n      duration: 1h\n",
            "rollwright.yaml:3: rollout/windows/0: Value error, 'RRULE:FREQ=DAILY;BYHOUR=x' is "
            "not a valid RRULE",
        ),
        (
            "rollout:\n  windows:\n    - deny: 'RRULE:FREQ=DAILY;UNTIL=20250101T000000Z'\n"
            "      duration: 1h\n",
            "rollwright.yaml:3: rollout/windows/0: Value error, 'RRULE:FREQ=DAILY;UNTIL="
            "20250101T000000Z': write UNTIL in the rule's local time, without Z",
        ),
        (
            "rollout:\n  windows:\n    - allow: '0 9 * * *'\n      deny: '0 18 * * *'\n"
            "      duration: 1h\n",
            "rollwright.yaml:3: rollout/windows/0: Value error, a window needs exactly one of "
            "allow and deny",
        ),
        (
            "rollout:\n  windows:\n    - allow: '0 9 * * *'\n",
            "rollwright.yaml:3: missing required key 'rollout/windows/0/duration'",
        ),
        (
            "rollout:\n  windows:\n    - allow: '0 9 * * *'\n      duration: 1h\n"
            "      timezone: Europe/Berln\n",
            "rollwright.yaml:5: rollout/windows/0/timezone: Value error, unknown time zone "
            "'Europe/Berln'",
        ),
        (
            "rollout:\n  soak: 2 hours\n",
            "rollwright.yaml:2: rollout/soak: String should match pattern",
        ),
        # a dimension of config/config.yaml; which one, the promotion engine checks
        ("rollout:\n  step: Region\n", "rollwright.yaml:2: rollout/step: String should match"),
        ("rollout:\n  windos: []\n", "rollwright.yaml:2: unknown key 'rollout/windos'"),
    ],
)
def test_rollout_errors_name_file_key_and_line(tmp_path: Path, text: str, expected: str) -> None:
    problems = load_errors(tmp_path, text)
    assert any(p.startswith(expected) for p in problems), problems


def test_cli_reports_rollout_errors_with_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = copy_example("dimensions-fleet", tmp_path / "fleet")
    (repo / "rollwright.yaml").write_text(
        "rollout:\n  windows:\n    - allow: 'every day'\n      duration: 1h\n"
    )
    assert main(["rollout", "status", "--repo", str(repo)]) == 2
    err = capsys.readouterr().err
    assert "rollwright.yaml:3: rollout/windows/0: Value error, 'every day'" in err

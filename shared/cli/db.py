"""`rollwright db upgrade` and `rollwright db current`: the SQL schema's version by hand.

The gateway and the worker migrate at start anyway (shared/stores/schema.py); these commands are for
migrating ahead of a rollout, or checking where a database stands. The database is
`--database URL` or the one the settings name (`ROLLWRIGHT_DATABASE_URL`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parsers(sub: Any) -> None:
    """Register `db` on the `rollwright` subparsers."""
    db = sub.add_parser("db", help="the SQL database's schema: upgrade, current")
    commands = db.add_subparsers(dest="db_command", required=True)
    for name, help_text, func in (
        ("upgrade", "migrate the database to the newest schema revision", cmd_upgrade),
        ("current", "print the database's schema revision and the newest one", cmd_current),
    ):
        p = commands.add_parser(name, help=help_text)
        p.add_argument(
            "--database",
            metavar="URL",
            help="SQLAlchemy URL (default: ROLLWRIGHT_DATABASE_URL, else the local SQLite file)",
        )
        p.set_defaults(func=func)


def cmd_upgrade(args: argparse.Namespace) -> int:
    # Start-up time: SQLAlchemy and Alembic load only for `db` commands.
    from shared.stores import schema as dbschema  # noqa: PLC0415

    engine = dbschema.command_engine(_url(args))
    where = engine.url.render_as_string(hide_password=True)
    try:
        before, after = dbschema.upgrade(engine)
    except Exception as error:  # the driver's own errors: unreachable, refused, …
        print(f"error: migrating the database {where}: {_reason(error)}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    if before == after:
        print(f"{where}: already at revision {after}")
    else:
        print(f"{where}: migrated from {before or 'an empty database'} to revision {after}")
    return 0


def cmd_current(args: argparse.Namespace) -> int:
    # Start-up time: SQLAlchemy and Alembic load only for `db` commands.
    from shared.stores import schema as dbschema  # noqa: PLC0415

    engine = dbschema.command_engine(_url(args))
    where = engine.url.render_as_string(hide_password=True)
    try:
        current = dbschema.current_revision(engine)
    except Exception as error:
        print(f"error: reading the schema revision of {where}: {_reason(error)}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    head = dbschema.head_revision()
    if current == head:
        print(f"{where}: revision {current} (the newest)")
    else:
        shown = current or "none (no rollwright tables migrated yet)"
        print(f"{where}: revision {shown}; the newest is {head}: run `rollwright db upgrade`")
    return 0


def _url(args: argparse.Namespace) -> str:
    if args.database is not None:
        return str(args.database)
    # Start-up time: the settings (pydantic-settings) load only for `db` without --database.
    from shared.settings import Settings  # noqa: PLC0415

    return Settings().database


def _reason(error: Exception) -> str:
    # SQLAlchemy appends the statement and a help link; the driver's first line says why
    original = getattr(error, "orig", None) or error
    return str(original).strip().splitlines()[0] if str(original).strip() else repr(original)

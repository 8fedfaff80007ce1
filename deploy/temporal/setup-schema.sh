#!/bin/sh
# Create or migrate Temporal's two PostgreSQL databases (run by the `temporal-schema` service
# of docker-compose.yml with the temporalio/admin-tools image before the server starts).
# Idempotent: `create` of an existing database and `setup-schema -v 0.0` of an existing schema
# fail harmlessly; `update-schema` brings either to the image's version.
set -eu

: "${POSTGRES_SEEDS:=postgres}" "${DB_PORT:=5432}" "${POSTGRES_USER:=temporal}"
export SQL_PASSWORD="${POSTGRES_PWD:?POSTGRES_PWD is not set}"
SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

until nc -z -w 5 "$POSTGRES_SEEDS" "$DB_PORT"; do
  echo "waiting for PostgreSQL at $POSTGRES_SEEDS:$DB_PORT"
  sleep 2
done

for db in temporal temporal_visibility; do
  case "$db" in
    temporal) versioned="$SCHEMA_DIR/temporal/versioned" ;;
    *) versioned="$SCHEMA_DIR/visibility/versioned" ;;
  esac
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" \
    -u "$POSTGRES_USER" --db "$db" create || echo "database $db exists"
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" \
    -u "$POSTGRES_USER" --db "$db" setup-schema -v 0.0 || echo "schema of $db exists"
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" \
    -u "$POSTGRES_USER" --db "$db" update-schema -d "$versioned"
done
echo "Temporal schema ready"

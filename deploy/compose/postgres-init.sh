#!/bin/sh
# First start of the PostgreSQL container (docker-entrypoint-initdb.d): a role and a database
# for rollwright's own tables (deployments, webhook deliveries, jobs), next to Temporal's.
# Temporal's databases are created by deploy/temporal/setup-schema.sh.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v rw_password="$ROLLWRIGHT_DB_PASSWORD" <<'SQL'
CREATE ROLE rollwright LOGIN PASSWORD :'rw_password';
CREATE DATABASE rollwright OWNER rollwright;
SQL

#!/bin/sh
# Prepare the Temporal namespace rollwright uses: create it when missing and register the
# search attributes its workflows upsert. Run once per namespace (docker-compose.yml runs it
# as the `temporal-setup` service with the temporalio/admin-tools image); safe to re-run.
#
#   TEMPORAL_ADDRESS    frontend host:port (default temporal:7233)
#   NAMESPACE           namespace (default: default)
#   RETENTION           closed-workflow retention for a new namespace (default 30d)
set -eu

ADDRESS="${TEMPORAL_ADDRESS:-temporal:7233}"
NAMESPACE="${NAMESPACE:-default}"
RETENTION="${RETENTION:-30d}"
# Keep in sync with shared/contracts/deploy.py SEARCH_ATTRIBUTES (tests/devstack/test_compose.py
# checks it).
ATTRIBUTES="RollwrightRepo RollwrightRoot RollwrightRevision RollwrightTrigger RollwrightState"

attempt=0
until temporal operator cluster health --address "$ADDRESS" >/dev/null 2>&1; do
  attempt=$((attempt + 1))
  if [ "$attempt" -ge 60 ]; then
    echo "Temporal at $ADDRESS is not healthy after $attempt attempts" >&2
    exit 1
  fi
  sleep 2
done

if ! temporal operator namespace describe --address "$ADDRESS" -n "$NAMESPACE" >/dev/null 2>&1; then
  temporal operator namespace create --address "$ADDRESS" -n "$NAMESPACE" --retention "$RETENTION"
  echo "namespace $NAMESPACE created (retention $RETENTION)"
fi

# A namespace just created can take a moment before its search attributes can be listed.
attempt=0
until known="$(temporal operator search-attribute list --address "$ADDRESS" -n "$NAMESPACE" 2>/dev/null)"; do
  attempt=$((attempt + 1))
  [ "$attempt" -lt 30 ] || exit 1
  sleep 2
done
for name in $ATTRIBUTES; do
  if printf '%s\n' "$known" | grep -Eq "^[[:space:]]*$name[[:space:]]"; then
    echo "search attribute $name already registered"
  else
    temporal operator search-attribute create --address "$ADDRESS" -n "$NAMESPACE" \
      --name "$name" --type Keyword
    echo "search attribute $name registered (Keyword)"
  fi
done

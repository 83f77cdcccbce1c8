#!/usr/bin/env bash
# The test command (`npm test`): builds, starts a private QuestDB when none is configured and
# Java is present, runs every test against real PostgreSQL, PGlite and QuestDB, and stops
# what it started. Extra arguments go to tap (e.g. `npm test -- test/stores`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

npm run --silent build

export TEST_DATABASE_URL=${TEST_DATABASE_URL:-${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}}
if [ -n "${QUESTDB_URL:-}" ]; then
  export TEST_QUESTDB_URL=$QUESTDB_URL
  [ -n "${QUESTDB_PG_URL:-}" ] && export TEST_QUESTDB_PG_URL=$QUESTDB_PG_URL
elif [ -z "${TEST_QUESTDB_URL:-}" ] && command -v java >/dev/null 2>&1; then
  # A private server on its own ports and folder, so it cannot meet a developer's QuestDB.
  export QUESTDB_DIR=$ROOT/.questdb/test QUESTDB_HTTP_PORT=19100 QUESTDB_PG_PORT=18912 \
    QUESTDB_ILP_PORT=19109 QUESTDB_HTTP_MIN_PORT=19103 QUESTDB_HEAP=${QUESTDB_HEAP:-1g}
  rm -rf "$QUESTDB_DIR/db"
  bash scripts/questdb.sh start
  trap 'bash scripts/questdb.sh stop' EXIT
  export TEST_QUESTDB_URL=http://127.0.0.1:19100 TEST_QUESTDB_PG_URL=postgres://admin:quest@127.0.0.1:18912/qdb
fi

# Tests must not pick up the developer's own service configuration.
unset DATABASE_URL QUESTDB_URL QUESTDB_PG_URL VIGIL_SECRET VIGIL_DATA_DIR PORT HOST PUBLIC_URL SMTP_URL
npx tap "$@"

#!/usr/bin/env bash
# Runs a local QuestDB server for tests, benchmarks and development.
#
#   scripts/questdb.sh start    fetch the pinned jar (cached by Maven), start, wait until it answers
#   scripts/questdb.sh stop     stop the server this script started (by its pid)
#   scripts/questdb.sh status   exit 0 when it is running and answers
#   scripts/questdb.sh version  print the pinned version
#
# Environment: QUESTDB_DIR (data, config, pid and log; default ./.questdb), QUESTDB_HTTP_PORT
# (9000), QUESTDB_PG_PORT (8812), QUESTDB_ILP_PORT (9009), QUESTDB_HTTP_MIN_PORT (9003),
# QUESTDB_HEAP (2g), QUESTDB_APPLY_SLEEP_MS (100: how long the WAL apply worker sleeps once idle,
# so commits are applied in batches), QUESTDB_LOG_LEVEL (ERROR,CRITICAL,ADVISORY; INFO to see every commit), JAVA_HOME (a JDK 17 or newer; default: java on PATH).
set -euo pipefail

# The one place the QuestDB version is pinned (docker-compose.yml must match; a test checks it).
# 9.4 and later need Java 25; 9.3.x is the newest line that runs on Java 17.
QUESTDB_VERSION=9.3.4

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${QUESTDB_DIR:-$ROOT/.questdb}
HTTP_PORT=${QUESTDB_HTTP_PORT:-9000}
PG_PORT=${QUESTDB_PG_PORT:-8812}
ILP_PORT=${QUESTDB_ILP_PORT:-9009}
HTTP_MIN_PORT=${QUESTDB_HTTP_MIN_PORT:-9003}
HEAP=${QUESTDB_HEAP:-2g}
APPLY_SLEEP_MS=${QUESTDB_APPLY_SLEEP_MS:-100}
case "$APPLY_SLEEP_MS" in
  ''|*[!0-9]*) printf 'questdb: QUESTDB_APPLY_SLEEP_MS must be a whole number of milliseconds (e.g. 100), got "%s"\n' "$APPLY_SLEEP_MS" >&2; exit 2 ;;
esac
M2=${MAVEN_REPO:-$HOME/.m2/repository}
JAR="$M2/org/questdb/questdb/$QUESTDB_VERSION/questdb-$QUESTDB_VERSION.jar"
PIDFILE="$DIR/questdb.pid"
LOG="$DIR/questdb.log"

say() { printf 'questdb: %s\n' "$*" >&2; }

java_bin() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then echo "$JAVA_HOME/bin/java"; return; fi
  command -v java || { say "no java found: install a JDK 17 or newer, or set JAVA_HOME"; exit 1; }
}

answers() {
  curl -fsS -m 2 "http://127.0.0.1:$HTTP_PORT/exec?query=select%201" >/dev/null 2>&1
}

running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid; pid=$(cat "$PIDFILE")
  kill -0 "$pid" 2>/dev/null && echo "$pid"
}

fetch() {
  if [ -f "$JAR" ]; then return; fi
  say "fetching org.questdb:questdb:$QUESTDB_VERSION with Maven (once; cached in $M2)"
  mvn -q -B dependency:get -Dartifact="org.questdb:questdb:$QUESTDB_VERSION" -Dtransitive=false >&2 \
    || { say "Maven could not fetch the jar; check that Maven Central is reachable"; exit 1; }
}

start() {
  if pid=$(running_pid) && answers; then say "already running (pid $pid) at http://127.0.0.1:$HTTP_PORT"; return; fi
  fetch
  local java; java=$(java_bin)
  local major; major=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  if [ "${major:-0}" -lt 17 ]; then say "QuestDB $QUESTDB_VERSION needs Java 17 or newer; $java is $major"; exit 1; fi
  mkdir -p "$DIR/conf"
  cat > "$DIR/conf/server.conf" <<CONF
http.bind.to=127.0.0.1:$HTTP_PORT
http.min.net.bind.to=127.0.0.1:$HTTP_MIN_PORT
pg.net.bind.to=127.0.0.1:$PG_PORT
line.tcp.net.bind.to=127.0.0.1:$ILP_PORT
line.udp.enabled=false
telemetry.enabled=false
telemetry.hide.tables=true
# Tables are created by Vigil's DDL; ILP must not invent them with guessed types.
line.auto.create.new.tables=false
line.auto.create.new.columns=false
# Sized for a small host that QuestDB shares with Vigil (and, here, with tests and load
# generators). QuestDB's workers spin with sched_yield while waiting for work; under a steady
# stream of small ILP commits that spinning took a whole core on 2 cores and starved Vigil.
# One worker per pool, and a 1 ms nap after 20 idle loops, halved QuestDB's CPU per heartbeat
# (bench/ingest.ts). On a dedicated many-core QuestDB host, drop these lines.
shared.worker.count=1
wal.apply.worker.count=1
shared.worker.yield.threshold=10
shared.worker.nap.threshold=20
shared.worker.sleep.threshold=1000
# The WAL apply worker sleeps $APPLY_SLEEP_MS ms once idle: commits that arrive meanwhile are
# applied together, squashed into one out-of-order merge instead of one each. Heartbeat ingest at
# 100 gateways: QuestDB 96 -> 37 us CPU per heartbeat, 1.5x the throughput (bench/ingest.ts,
# docs/benchmarks.md "Fleet scale"). The price: a committed row becomes visible to reads up to that much later.
wal.apply.worker.yield.threshold=10
wal.apply.worker.nap.threshold=1
wal.apply.worker.sleep.threshold=2
wal.apply.worker.sleep.timeout=$APPLY_SLEEP_MS
CONF
  # INFO logs several lines per WAL commit; under steady ingest that formatting and writing
  # cost QuestDB a sixth of a core. QUESTDB_LOG_LEVEL=INFO brings them back for debugging.
  cat > "$DIR/conf/log.conf" <<LOGCONF
writers=stdout
w.stdout.class=io.questdb.log.LogConsoleWriter
w.stdout.level=${QUESTDB_LOG_LEVEL:-ERROR,CRITICAL,ADVISORY}
LOGCONF
  say "starting QuestDB $QUESTDB_VERSION (data in $DIR)"
  nohup "$java" -Xms256m -Xmx"$HEAP" -XX:+UseParallelGC \
    -p "$JAR" -m io.questdb/io.questdb.ServerMain -d "$DIR" >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 120); do
    if answers; then say "ready at http://127.0.0.1:$HTTP_PORT (pg-wire 127.0.0.1:$PG_PORT), pid $(cat "$PIDFILE")"; return; fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then say "QuestDB exited during start; last log lines:"; tail -20 "$LOG" >&2; exit 1; fi
    sleep 0.5
  done
  say "QuestDB did not answer within 60 s; see $LOG"; exit 1
}

stop() {
  local pid
  if ! pid=$(running_pid); then say "not running"; rm -f "$PIDFILE"; return; fi
  kill "$pid"
  for _ in $(seq 1 40); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$PIDFILE"; say "stopped (pid $pid)"; return; }
    sleep 0.5
  done
  say "pid $pid did not stop within 20 s; killing it"; kill -9 "$pid" 2>/dev/null || true; rm -f "$PIDFILE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if pid=$(running_pid) && answers; then echo "running (pid $pid) at http://127.0.0.1:$HTTP_PORT"; else echo "not running"; exit 1; fi ;;
  version) echo "$QUESTDB_VERSION" ;;
  *) echo "usage: $0 start|stop|status|version" >&2; exit 2 ;;
esac

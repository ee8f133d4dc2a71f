#!/usr/bin/env bash
# A real single-node Apache Kafka (KRaft, broker+controller in one JVM) for
# tests and CI, without Docker: the broker comes as jars from Maven Central
# (scripts/kafka/pom.xml) and runs as `java -cp '.kafka/libs/*' kafka.Kafka`.
#
#   scripts/kafka.sh fetch    resolve the jars into .kafka/libs (idempotent; ~/.m2 caches them)
#   scripts/kafka.sh start    fresh storage, free ports, wait until ready; prints 127.0.0.1:PORT
#   scripts/kafka.sh stop     stop the broker and wait for it to exit
#   scripts/kafka.sh status   "running PID BOOTSTRAP" (exit 0) or "stopped" (exit 1)
#
# Files, all under .kafka/ in the repo root (git-ignored):
#   libs/            the jars          bootstrap   127.0.0.1:PORT of the running broker
#   data/            KRaft log dirs    pid         the broker JVM's pid
#   logs/            server.log, stdout.log, format.log
#   server.properties, log4j.properties   written by `start`
#
# Environment knobs: KAFKA_HEAP_OPTS (default -Xms256m -Xmx512m),
# KAFKA_START_TIMEOUT (seconds, default 90), MVN (default mvn).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/scripts/kafka/pom.xml"
KDIR="$ROOT/.kafka"
LIBS="$KDIR/libs"
DATA="$KDIR/data"
LOGS="$KDIR/logs"
PIDFILE="$KDIR/pid"
BOOTFILE="$KDIR/bootstrap"
STAMP="$LIBS/.pom.sha256"

MVN="${MVN:-mvn}"
HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"

log() { echo "kafka.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

python_bin() {
    local p
    for p in "$ROOT/.venv/bin/python" python3 python3.11; do
        if command -v "$p" >/dev/null 2>&1; then echo "$p"; return 0; fi
    done
    die "python3 is needed (to pick free ports and probe the broker)"
}

pom_hash() { sha256sum "$POM" | cut -d' ' -f1; }

cmd_fetch() {
    [[ -f "$POM" ]] || die "missing $POM"
    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$(pom_hash)" ]] \
        && compgen -G "$LIBS/kafka_2.13-*.jar" >/dev/null; then
        log "jars already in $LIBS"
        return 0
    fi
    command -v "$MVN" >/dev/null 2>&1 || die "maven ($MVN) not found; install it (Debian: apt-get install maven)"
    command -v java >/dev/null 2>&1 || die "java not found; Kafka needs Java 17+"
    mkdir -p "$KDIR"
    local tmp="$KDIR/libs.tmp.$$"
    rm -rf "$tmp"
    log "resolving Kafka jars with maven (cached in ~/.m2) ..."
    # (the sed drops the colour escapes Debian's maven prints even in batch mode)
    if ! "$MVN" -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
        -DoutputDirectory="$tmp" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' >&2; then
        rm -rf "$tmp"
        die "maven could not resolve the Kafka jars"
    fi
    pom_hash >"$tmp/.pom.sha256"
    rm -rf "$LIBS"
    mv "$tmp" "$LIBS"
    log "$(find "$LIBS" -name '*.jar' | wc -l) jars in $LIBS"
}

# Is the process alive (a zombie waiting to be reaped counts as dead)?
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    local state
    state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo X)"
    [[ "$state" != Z && "$state" != X ]]
}

# The broker JVM's pid if it is running (and is really our broker), else nothing.
running_pid() {
    [[ -f "$PIDFILE" ]] || return 1
    local pid
    pid="$(cat "$PIDFILE" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    alive "$pid" || return 1
    # Guard against a recycled pid: it must be a kafka.Kafka JVM on our config.
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $KDIR/server.properties" || return 1
    echo "$pid"
}

free_ports() {  # prints two distinct free TCP ports on 127.0.0.1
    "$(python_bin)" - <<'PY'
import socket
socks = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

# Real client call: a Kafka MetadataRequest (v4, valid on Kafka 3.x and 4.x).
# Exits 0 once the broker answers with at least one live broker in the cluster.
probe() {
    "$(python_bin)" - "$1" <<'PY'
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
try:
    with socket.create_connection((host, int(port)), timeout=2) as s:
        s.settimeout(5)
        cid = b"kafka.sh-probe"
        # header v1: api_key=3 (Metadata), api_version=4, correlation_id, client_id
        # body v4: topics=null (-1), allow_auto_topic_creation=false
        req = struct.pack(">hhih", 3, 4, 7, len(cid)) + cid + struct.pack(">ib", -1, 0)
        s.sendall(struct.pack(">i", len(req)) + req)
        def read(n):
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise EOFError
                buf += chunk
            return buf
        (size,) = struct.unpack(">i", read(4))
        body = read(size)
        corr, _throttle, nbrokers = struct.unpack_from(">iii", body, 0)
        sys.exit(0 if corr == 7 and nbrokers >= 1 else 1)
except Exception:
    sys.exit(1)
PY
}

write_config() {  # $1 = broker port, $2 = controller port
    local port="$1" cport="$2"
    cat >"$KDIR/server.properties" <<EOF
# Written by scripts/kafka.sh start: single-node KRaft for tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA
# Single node: internal topics with replication 1, so consumer groups,
# transactions and exactly-once work.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
default.replication.factor=1
min.insync.replicas=1
num.partitions=1
auto.create.topics.enable=true
delete.topic.enable=true
# Tests: no wait before the first rebalance of a new group.
group.initial.rebalance.delay.ms=0
# Small footprint (Faust changelogs are compacted; the cleaner's default buffer is 128 MiB).
log.cleaner.dedupe.buffer.size=16777216
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
EOF
    cat >"$KDIR/log4j.properties" <<EOF
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$LOGS/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.org.apache.kafka.raft=WARN
EOF
}

java_opts() {
    # shellcheck disable=SC2206
    JAVA_OPTS=($HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:TieredStopAtLevel=1
        -Djava.awt.headless=true -Dkafka.logs.dir="$LOGS"
        -Dlog4j.configuration="file:$KDIR/log4j.properties")
}

start_once() {  # one attempt; returns 0 when the broker is ready
    local ports port cport cluster_id pid deadline
    ports="$(free_ports)"
    port="${ports% *}"
    cport="${ports#* }"
    rm -rf "$DATA" "$LOGS" "$PIDFILE" "$BOOTFILE"
    mkdir -p "$DATA" "$LOGS"
    write_config "$port" "$cport"
    java_opts
    # A random cluster id: 16 random bytes, base64url without padding (Kafka's
    # Uuid form); like Kafka's Uuid.randomUuid, never one starting with "-".
    cluster_id="-"
    while [[ "$cluster_id" == -* ]]; do
        cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    done
    if ! java "${JAVA_OPTS[@]}" -cp "$LIBS/*" kafka.tools.StorageTool format \
        --cluster-id="$cluster_id" --config="$KDIR/server.properties" \
        >"$LOGS/format.log" 2>&1 9>&-; then
        cat "$LOGS/format.log" >&2
        log "formatting the KRaft storage failed"
        return 1
    fi
    # 9>&-: the broker must not inherit (and so hold) the lock of `lock` below.
    nohup java "${JAVA_OPTS[@]}" -cp "$LIBS/*" kafka.Kafka "$KDIR/server.properties" \
        >"$LOGS/stdout.log" 2>&1 </dev/null 9>&- &
    pid=$!
    echo "$pid" >"$PIDFILE"
    deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        if ! alive "$pid"; then
            log "broker exited during startup; last log lines:"
            tail -n 30 "$LOGS/server.log" "$LOGS/stdout.log" >&2 2>/dev/null || true
            rm -f "$PIDFILE"
            return 1
        fi
        if probe "127.0.0.1:$port"; then
            echo "127.0.0.1:$port" >"$BOOTFILE"
            return 0
        fi
        sleep 0.25
    done
    log "broker not ready after ${START_TIMEOUT}s; last log lines:"
    tail -n 30 "$LOGS/server.log" >&2 2>/dev/null || true
    cmd_stop >/dev/null 2>&1 || true
    return 1
}

cmd_start() {
    local pid attempt
    if pid="$(running_pid)" && [[ -f "$BOOTFILE" ]]; then
        log "already running (pid $pid)"
        cat "$BOOTFILE"
        return 0
    fi
    command -v java >/dev/null 2>&1 || die "java not found; Kafka needs Java 17+"
    cmd_fetch
    # Retry: a port picked as free can be taken before the broker binds it.
    for attempt in 1 2 3; do
        if start_once; then
            log "ready in ${SECONDS}s (pid $(cat "$PIDFILE"))"
            cat "$BOOTFILE"
            return 0
        fi
        log "start attempt $attempt failed"
    done
    die "could not start Kafka (logs in $LOGS)"
}

cmd_stop() {
    local pid i
    if ! pid="$(running_pid)"; then
        rm -f "$PIDFILE" "$BOOTFILE"
        log "not running"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 120; i++)); do  # up to 30 s for a clean shutdown
        alive "$pid" || break
        sleep 0.25
    done
    if alive "$pid"; then
        log "pid $pid still alive after 30s; killing"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do alive "$pid" || break; sleep 0.1; done
    fi
    rm -f "$PIDFILE" "$BOOTFILE"
    log "stopped (pid $pid)"
}

cmd_status() {
    local pid
    if pid="$(running_pid)"; then
        echo "running $pid $(cat "$BOOTFILE" 2>/dev/null || echo '?')"
        return 0
    fi
    echo "stopped"
    return 1
}

# One start/stop/fetch at a time per checkout (two test sessions starting at once
# would otherwise wipe each other's storage).
lock() {
    mkdir -p "$KDIR"
    exec 9>"$KDIR/lock"
    if command -v flock >/dev/null 2>&1; then
        flock -w 900 9 || log "warning: could not take $KDIR/lock in 900s; going on"
    fi
}

case "${1:-}" in
    fetch) lock; cmd_fetch ;;
    start) lock; cmd_start ;;
    stop) lock; cmd_stop ;;
    status) cmd_status ;;
    *)
        echo "usage: $0 {fetch|start|stop|status}" >&2
        exit 2
        ;;
esac

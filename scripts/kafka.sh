#!/usr/bin/env bash
# A real single-node Apache Kafka (KRaft, broker+controller in one JVM) for
# tests and CI, without Docker: the broker comes as jars from Maven Central
# (scripts/kafka/pom.xml) and runs as `java -cp '.kafka/libs/*' kafka.Kafka`.
#
#   scripts/kafka.sh fetch    resolve the jars into .kafka/libs (idempotent; ~/.m2 caches them)
#   scripts/kafka.sh start    fresh storage, free ports, wait until ready; prints 127.0.0.1:PORT
#                             (the PLAINTEXT listener; a SASL_SSL one runs beside it, see below)
#   scripts/kafka.sh stop     stop the broker and wait for it to exit
#   scripts/kafka.sh status   "running PID BOOTSTRAP" (exit 0) or "stopped" (exit 1)
#   scripts/kafka.sh kill     SIGKILL the broker (a crash): its storage, config and ports stay
#   scripts/kafka.sh resume   start the broker again on the storage and ports it had, wait until
#                             ready; prints 127.0.0.1:PORT (tests that crash the broker mid-run)
#
# Files, all under .kafka/ in the repo root (git-ignored):
#   libs/            the jars          bootstrap   127.0.0.1:PORT of the running broker
#   data/            KRaft log dirs    pid         the broker JVM's pid
#   logs/            server.log, stdout.log, format.log
#   server.properties, log4j.properties   written by `start`
#   tls/             CA, broker keystore and truststore (keytool), client PEMs (openssl);
#                    made once, kept across starts
#   sasl-ssl/        the SASL_SSL listener, for clients: bootstrap (127.0.0.1:PORT),
#                    username, password (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 alike,
#                    new on every start), ca.pem, client.pem, client.key (the broker
#                    requires a client certificate signed by the CA)
#
# A second broker beside it: KAFKA_INSTANCE=NAME (letters, digits, '-') before any command
# keeps that broker's files in .kafka/instances/NAME/ (the jars stay shared in .kafka/libs);
# tests that crash a broker use one of their own, so its recovery time does not depend on
# what the rest of the suite wrote.
#
# Environment knobs: KAFKA_HEAP_OPTS (default -Xms256m -Xmx512m),
# KAFKA_START_TIMEOUT (seconds, default 90), MVN (default mvn).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/scripts/kafka/pom.xml"
INSTANCE="${KAFKA_INSTANCE:-default}"
[[ "$INSTANCE" =~ ^[A-Za-z0-9][A-Za-z0-9-]{0,39}$ ]] || {
    echo "kafka.sh: error: KAFKA_INSTANCE=$INSTANCE: use 1-40 letters, digits or '-' (first not '-')" >&2
    exit 2
}
KROOT="$ROOT/.kafka"
if [[ "$INSTANCE" == default ]]; then
    KDIR="$KROOT"
else
    KDIR="$KROOT/instances/$INSTANCE"
fi
LIBS="$KROOT/libs"
DATA="$KDIR/data"
LOGS="$KDIR/logs"
PIDFILE="$KDIR/pid"
BOOTFILE="$KDIR/bootstrap"
STAMP="$LIBS/.pom.sha256"
TLS="$KDIR/tls"
SASL="$KDIR/sasl-ssl"
SASL_USER=kueuestream

MVN="${MVN:-mvn}"
HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"

export SCRIPT=kafka.sh
# shellcheck source=scripts/lib/processes.sh
source "$ROOT/scripts/lib/processes.sh"

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
    mkdir -p "$KROOT"
    local tmp="$KROOT/libs.tmp.$$"
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

# Real client call: a Kafka MetadataRequest (v4, valid on Kafka 3.x and 4.x).
# Exits 0 once the broker answers with at least one live broker in the cluster.
probe() {
    "$(python_bin "to probe the broker")" - "$1" <<'PY'
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

# keytool is a JVM per call: these flags halve its start-up time.
keytool_() { keytool -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC "$@"; }

random_hex() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# A test CA, the broker's keystore (a key and a certificate for localhost and
# 127.0.0.1 signed by the CA) and truststore (the CA, to verify clients), and a
# client certificate and key as PEM files for the Python clients. Made once
# (a JVM per keytool call makes it slow) and kept in .kafka/tls across starts.
make_tls() {
    [[ -f "$TLS/.complete" ]] && return 0
    command -v keytool >/dev/null 2>&1 || die "keytool not found; it comes with the JDK (Java 17+)"
    command -v openssl >/dev/null 2>&1 || die "openssl not found; it turns the client's keystore into PEM files"
    log "making the test CA, broker keystore and client certificate (keytool, once) ..."
    rm -rf "$TLS"
    mkdir -p "$TLS"
    chmod 700 "$TLS"
    : >"$KDIR/tls.log"
    local pass
    pass="$(random_hex)"
    echo "$pass" >"$TLS/storepass"
    TLS_STORE=(-storetype PKCS12 -storepass "$pass")
    tls_step keytool_ -genkeypair -alias ca "${TLS_KEY[@]}" -dname "CN=kueuestream test CA" -ext bc:c \
        -validity "$TLS_DAYS" -keystore "$TLS/ca.p12" "${TLS_STORE[@]}"
    tls_step keytool_ -exportcert -rfc -alias ca -keystore "$TLS/ca.p12" "${TLS_STORE[@]}" -file "$TLS/ca.pem"
    tls_step keytool_ -importcert -noprompt -alias ca -file "$TLS/ca.pem" \
        -keystore "$TLS/truststore.p12" "${TLS_STORE[@]}"
    tls_signed broker "CN=localhost" -ext SAN=dns:localhost,ip:127.0.0.1 -ext EKU=serverAuth
    tls_signed client "CN=kueuestream test client" -ext EKU=clientAuth
    tls_step openssl pkcs12 -in "$TLS/client.p12" -passin "pass:$pass" -nocerts -nodes -out "$TLS/client.key"
    tls_step openssl pkcs12 -in "$TLS/client.p12" -passin "pass:$pass" -clcerts -nokeys -out "$TLS/client.pem"
    rm -f "$TLS"/*.csr
    touch "$TLS/.complete"
}

TLS_DAYS=3650
TLS_KEY=(-keyalg EC -groupname secp256r1)

tls_step() {  # one command of make_tls; on failure, its output and the end
    if ! "$@" >>"$KDIR/tls.log" 2>&1; then
        cat "$KDIR/tls.log" >&2
        die "making the TLS files failed at: $1 $2"
    fi
}

tls_signed() {  # $1 = alias, $2 = subject, $3... = keytool -gencert extensions
    local alias="$1" dname="$2"
    shift 2
    tls_step keytool_ -genkeypair -alias "$alias" "${TLS_KEY[@]}" -dname "$dname" -validity "$TLS_DAYS" \
        -keystore "$TLS/$alias.p12" "${TLS_STORE[@]}"
    tls_step keytool_ -certreq -alias "$alias" -keystore "$TLS/$alias.p12" "${TLS_STORE[@]}" \
        -file "$TLS/$alias.csr"
    tls_step keytool_ -gencert -alias ca -keystore "$TLS/ca.p12" "${TLS_STORE[@]}" -infile "$TLS/$alias.csr" \
        -outfile "$TLS/$alias.crt" -rfc -validity "$TLS_DAYS" "$@"
    tls_step keytool_ -importcert -noprompt -alias ca -file "$TLS/ca.pem" -keystore "$TLS/$alias.p12" \
        "${TLS_STORE[@]}"
    tls_step keytool_ -importcert -alias "$alias" -file "$TLS/$alias.crt" -keystore "$TLS/$alias.p12" \
        "${TLS_STORE[@]}"
}

write_config() {  # $1 = broker port, $2 = controller port, $3 = SASL_SSL port, $4 = SASL password
    local port="$1" cport="$2" sport="$3" password="$4" storepass
    storepass="$(cat "$TLS/storepass")"
    cat >"$KDIR/server.properties" <<EOF
# Written by scripts/kafka.sh start: single-node KRaft for tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$sport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$sport
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
# SASL_SSL: TLS with a client certificate, then PLAIN (users in the JAAS line) or
# SCRAM (users in the cluster metadata, added by kafka-storage format --add-scram).
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=$TLS/broker.p12
listener.name.sasl_ssl.ssl.keystore.password=$storepass
listener.name.sasl_ssl.ssl.key.password=$storepass
listener.name.sasl_ssl.ssl.truststore.type=PKCS12
listener.name.sasl_ssl.ssl.truststore.location=$TLS/truststore.p12
listener.name.sasl_ssl.ssl.truststore.password=$storepass
listener.name.sasl_ssl.ssl.client.auth=required
listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER="$password";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
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
    local port cport sport password cluster_id pid deadline
    read -r port cport sport <<<"$(free_ports 3)"
    password="$(random_hex)"
    rm -rf "$DATA" "$LOGS" "$PIDFILE" "$BOOTFILE" "$SASL"
    mkdir -p "$DATA" "$LOGS"
    (umask 077 && write_config "$port" "$cport" "$sport" "$password")
    java_opts
    # A random cluster id: 16 random bytes, base64url without padding (Kafka's
    # Uuid form); like Kafka's Uuid.randomUuid, never one starting with "-".
    cluster_id="-"
    while [[ "$cluster_id" == -* ]]; do
        cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    done
    if ! java "${JAVA_OPTS[@]}" -cp "$LIBS/*" kafka.tools.StorageTool format \
        --cluster-id="$cluster_id" --config="$KDIR/server.properties" \
        --add-scram "SCRAM-SHA-256=[name=$SASL_USER,password=$password]" \
        --add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$password]" \
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
            write_sasl_ssl "127.0.0.1:$sport" "$password"
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

write_sasl_ssl() {  # $1 = the SASL_SSL listener's HOST:PORT, $2 = the password
    (
        umask 077
        mkdir -p "$SASL"
        cp "$TLS/ca.pem" "$TLS/client.pem" "$TLS/client.key" "$SASL/"
        echo "$SASL_USER" >"$SASL/username"
        echo "$2" >"$SASL/password"
        echo "$1" >"$SASL/bootstrap"
    )
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
    make_tls
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
    local pid
    if ! pid="$(running_pid)"; then
        rm -rf "$PIDFILE" "$BOOTFILE" "$SASL"
        log "not running"
        return 0
    fi
    stop_pid "$pid" broker
    rm -rf "$PIDFILE" "$BOOTFILE" "$SASL"
    log "stopped (pid $pid)"
}

cmd_kill() {
    local pid
    pid="$(running_pid)" || die "not running"
    kill -KILL "$pid"
    while alive "$pid"; do sleep 0.1; done
    log "killed (pid $pid); storage kept for resume"
}

cmd_resume() {
    local pid port deadline
    if pid="$(running_pid)"; then
        log "already running (pid $pid)"
        cat "$BOOTFILE"
        return 0
    fi
    [[ -f "$KDIR/server.properties" && -d "$DATA" && -f "$BOOTFILE" ]] \
        || die "nothing to resume in $KDIR: use start"
    port="$(cut -d: -f2 "$BOOTFILE")"
    java_opts
    nohup java "${JAVA_OPTS[@]}" -cp "$LIBS/*" kafka.Kafka "$KDIR/server.properties" \
        >>"$LOGS/stdout.log" 2>&1 </dev/null 9>&- &
    pid=$!
    echo "$pid" >"$PIDFILE"
    deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        alive "$pid" || die "broker exited while resuming; see $LOGS/server.log"
        if probe "127.0.0.1:$port"; then
            log "resumed in ${SECONDS}s (pid $pid)"
            cat "$BOOTFILE"
            return 0
        fi
        sleep 0.25
    done
    die "broker not ready ${START_TIMEOUT}s after resume; see $LOGS/server.log"
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

lock() { take_lock "$KDIR" 900; }

case "${1:-}" in
    fetch) lock; cmd_fetch ;;
    start) lock; cmd_start ;;
    stop) lock; cmd_stop ;;
    status) cmd_status ;;
    kill) lock; cmd_kill ;;
    resume) lock; cmd_resume ;;
    *)
        echo "usage: $0 {fetch|start|stop|status|kill|resume}" >&2
        exit 2
        ;;
esac

#!/usr/bin/env bash
# A real Kubernetes API server (etcd + kube-apiserver) for tests and CI, without
# Docker, release tarballs or setup-envtest: both are compiled from Go modules
# (the module proxy is the only source) and listen on 127.0.0.1. There is no
# kubelet, scheduler or controller-manager, the same shape as controller-runtime's
# envtest: objects are validated, stored and watched, RBAC is enforced, but
# nothing reconciles them (see "No controllers" below).
#
#   scripts/kube.sh build     compile etcd, etcdctl and kube-apiserver into the per-user cache
#                             (idempotent: ~8 min on 2 cores with cold Go caches, seconds after)
#   scripts/kube.sh start     fresh PKI, etcd data and free ports; waits for /readyz and prints
#                             the kubeconfig path on stdout (all else goes to stderr)
#   scripts/kube.sh stop      stop both servers; delete state and secrets, keep the logs
#   scripts/kube.sh status    "running https://127.0.0.1:PORT KUBECONFIG" and one line per
#                             process (exit 0), or "stopped" (exit 1)
#   scripts/kube.sh restart-apiserver   restart kube-apiserver alone (etcd keeps the data):
#                             every watch drops and the watch cache starts over
#   scripts/kube.sh stop-apiserver      stop kube-apiserver alone (etcd keeps the data): the
#                             cluster is unreachable until restart-apiserver brings it back
#                             on the same port
#   scripts/kube.sh env       shell exports for the running server: eval "$(scripts/kube.sh env)"
#
# Several servers at once: KUBE_INSTANCE=NAME (letters, digits, '-') before any command
# works on instance NAME, with its own state dir .kube/instances/NAME/, ports, PKI,
# etcd data and lock; e.g. a MultiKueue manager and two workers:
#   for i in manager worker1 worker2; do KUBE_INSTANCE=$i scripts/kube.sh start; done
# Without KUBE_INSTANCE (or KUBE_INSTANCE=default) it is the default instance in .kube/.
#
# Files:
#   .kube/ (repo root, git-ignored)   kubeconfig, ports, *.pid, pki/ (keys, tokens), logs/
#   .kube/instances/NAME/             the same files for instance NAME
#   $KUEUESTREAM_KUBE_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/kueuestream/kube)
#       kube-apiserver-VERSION/, etcd-VERSION/: the binaries, shared by every clone on the
#       machine so that a fresh clone does not pay the compile again
#   /dev/shm/kueuestream-etcd.*       etcd's data when /dev/shm has room (else .kube/etcd-data)
#
# The kubeconfig (cluster "kueuestream-test") has three contexts:
#   kueuestream-admin        (current) token of user kueuestream-admin, group system:masters
#   kueuestream-admin-cert   the same rights through a TLS client certificate
#   kueuestream-controller   token of user kueuestream-controller, group kueuestream; nothing
#                            grants it any right, so a test binds exactly the Roles it means to
# The admin can also impersonate any user or group (Impersonate-User/-Group headers).
#
# Environment knobs: K8S_VERSION (default v1.34.4), ETCD_VERSION (v3.6.8),
# KUEUESTREAM_KUBE_CACHE, KUBE_START_TIMEOUT (seconds, default 120),
# APISERVER_EXTRA_ARGS (appended to kube-apiserver's flags, word-split), GO (the go command).
# A version without a go.sum in scripts/kube/pins/ builds unpinned and says how to pin it.
#
# No controllers, so: Jobs get no pods or status, there are no default
# ServiceAccounts, a deleted namespace stays Terminating forever, ownerReferences
# are not garbage-collected. Give each test its own namespace; do not wait for deletion.
# Clients must retry 429 "storage is (re)initializing" from custom resources for a
# moment after an apiserver restart (restart-apiserver itself waits that out).
# The watch cache hides etcd compaction: to get a watch a 410 Gone, restart the
# apiserver (restart-apiserver) or run it with APISERVER_EXTRA_ARGS=--watch-cache=false.
# A CRD as big as Kueue's Workload (1.4 MB) overflows client-side apply's annotation:
# create it or apply it server-side, then poll for Established (not set at once).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PINS="$ROOT/scripts/kube/pins"
INSTANCE="${KUBE_INSTANCE:-default}"
[[ "$INSTANCE" =~ ^[A-Za-z0-9][A-Za-z0-9-]{0,39}$ ]] || {
    echo "kube.sh: error: KUBE_INSTANCE=$INSTANCE: use 1-40 letters, digits or '-' (first not '-')" >&2
    exit 2
}
if [[ "$INSTANCE" == default ]]; then
    KDIR="$ROOT/.kube"
else
    KDIR="$ROOT/.kube/instances/$INSTANCE"
fi
PKI="$KDIR/pki"
LOGS="$KDIR/logs"
KUBECONFIG_FILE="$KDIR/kubeconfig"
PORTS_FILE="$KDIR/ports"
ETCD_DATA_FILE="$KDIR/etcd-data.path"

K8S_VERSION="${K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.8}"
CACHE="${KUEUESTREAM_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueuestream/kube}"
KAS_DIR="$CACHE/kube-apiserver-$K8S_VERSION"
ETCD_DIR="$CACHE/etcd-$ETCD_VERSION"
KAS_BIN="$KAS_DIR/kube-apiserver"
ETCD_BIN="$ETCD_DIR/etcd"
ETCDCTL_BIN="$ETCD_DIR/etcdctl"
START_TIMEOUT="${KUBE_START_TIMEOUT:-120}"

# $EPOCHREALTIME's decimal point follows the locale; `since` needs a dot.
export LC_NUMERIC=C

export SCRIPT=kube.sh
[[ "$INSTANCE" == default ]] || SCRIPT="kube.sh[$INSTANCE]"
# shellcheck source=scripts/lib/processes.sh
source "$ROOT/scripts/lib/processes.sh"

# Seconds since $1 (an $EPOCHREALTIME), one decimal.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

need() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || die "$tool not found (Debian: apt-get install $tool)"
    done
}

go_bin() {
    if [[ -n "${GO:-}" ]]; then echo "$GO"; return 0; fi
    if command -v go >/dev/null 2>&1; then command -v go; return 0; fi
    # Where the official Go tarball installs; often missing from a non-login PATH.
    if [[ -x /usr/local/go/bin/go ]]; then echo /usr/local/go/bin/go; return 0; fi
    die "go not found: building etcd and kube-apiserver needs Go 1.24 or newer (https://go.dev/doc/install; Debian bookworm's golang-go is too old); or set GO=/path/to/go"
}

# ---------------------------------------------------------------- build

# Build inputs that decide whether a cached binary is still the right one.
stamp() {  # stamp PIN_NAME VERSION
    local pin="$PINS/$1.go.sum"
    if [[ -f "$pin" ]]; then
        echo "$2 pinned $(sha256sum "$pin" | cut -d' ' -f1)"
    else
        echo "$2 unpinned"
    fi
}

built() {  # built DIR STAMP BINARY...
    local dir=$1 want=$2 bin
    shift 2
    for bin in "$@"; do [[ -x "$bin" ]] || return 1; done
    [[ "$(cat "$dir/.stamp" 2>/dev/null)" == "$want" ]]
}
etcd_built() { built "$ETCD_DIR" "$(stamp "etcd-$ETCD_VERSION" "$ETCD_VERSION")" "$ETCD_BIN" "$ETCDCTL_BIN"; }
apiserver_built() { built "$KAS_DIR" "$(stamp "kube-apiserver-$K8S_VERSION" "$K8S_VERSION")" "$KAS_BIN"; }

# With a checked-in go.sum every module of the build is checked against it, and
# -mod=readonly fails loudly on any drift instead of resolving something new.
# Without one, the go command fills go.sum itself (checksum database included).
use_pin() {  # use_pin SRC_DIR PIN_NAME -> prints the -mod flag
    if [[ -f "$PINS/$2.go.sum" ]]; then
        cp "$PINS/$2.go.sum" "$1/go.sum"
        echo "-mod=readonly"
    else
        echo "-mod=mod"
    fi
}

pin_hint() {  # pin_hint MODFLAG SRC_DIR PIN_NAME
    [[ "$1" == -mod=readonly ]] || log "built unpinned; to pin it: cp $2/go.sum scripts/kube/pins/$3.go.sum"
}

build_etcd() {
    if etcd_built; then
        log "etcd $ETCD_VERSION already built ($ETCD_DIR)"
        return 0
    fi
    local t0=$EPOCHREALTIME src="$CACHE/src/etcd-$ETCD_VERSION" out="$ETCD_DIR.tmp.$$" modflag
    GO="$(go_bin)"
    log "building etcd and etcdctl $ETCD_VERSION (~90 s on an idle 2-core machine with cold Go caches)"
    rm -rf "$src" "$out"
    mkdir -p "$src" "$out"
    # `go install go.etcd.io/etcd/server/v3@VERSION` refuses a module whose go.mod
    # has replace directives; a throwaway main module requiring it builds it fine.
    cat >"$src/go.mod" <<EOF
module kueuestream.local/etcd-build

go 1.24.0

require (
	go.etcd.io/etcd/server/v3 $ETCD_VERSION
	go.etcd.io/etcd/etcdctl/v3 $ETCD_VERSION
)
EOF
    echo 'package build' >"$src/build.go"
    modflag="$(use_pin "$src" "etcd-$ETCD_VERSION")"
    if ! (cd "$src" &&
        CGO_ENABLED=0 GOFLAGS="$modflag -buildvcs=false" \
            "$GO" build -trimpath -ldflags '-s -w' -o "$out/etcd" go.etcd.io/etcd/server/v3 &&
        CGO_ENABLED=0 GOFLAGS="$modflag -buildvcs=false" \
            "$GO" build -trimpath -ldflags '-s -w' -o "$out/etcdctl" go.etcd.io/etcd/etcdctl/v3) >&2; then
        rm -rf "$out"
        die "building etcd $ETCD_VERSION failed"
    fi
    stamp "etcd-$ETCD_VERSION" "$ETCD_VERSION" >"$out/.stamp"
    rm -rf "$ETCD_DIR"
    mv "$out" "$ETCD_DIR"
    pin_hint "$modflag" "$src" "etcd-$ETCD_VERSION"
    log "built etcd $ETCD_VERSION in $(since "$t0")s"
}

# k8s.io/kubernetes requires its ~30 staging modules (k8s.io/api, k8s.io/client-go,
# ...) at v0.0.0 and replaces them with ./staging/src/...; replaces in a dependency
# are ignored, so the wrapper module maps each one to the tag published with the
# release (v1.34.4 -> v0.34.4), taking the list from upstream's own go.mod.
write_apiserver_module() {  # write_apiserver_module SRC_DIR
    local src=$1 upstream staging="v0.${K8S_VERSION#v1.}"
    upstream="$(cd "$src" && GOFLAGS=-mod=mod "$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')" || true
    [[ -f "$upstream" ]] || die "could not download k8s.io/kubernetes@$K8S_VERSION"
    {
        echo "module kueuestream.local/kube-apiserver-build"
        echo
        grep -m1 '^go ' "$upstream"
        grep -m1 '^godebug ' "$upstream" || true
        echo
        echo "require k8s.io/kubernetes $K8S_VERSION"
        echo
        echo "replace ("
        awk -v v="$staging" '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { printf "\t%s => %s %s\n", $1, $1, v }' "$upstream"
        echo ")"
    } >"$src/go.mod"
    echo 'package build' >"$src/build.go"
}

build_apiserver() {
    if apiserver_built; then
        log "kube-apiserver $K8S_VERSION already built ($KAS_DIR)"
        return 0
    fi
    local t0=$EPOCHREALTIME src="$CACHE/src/kube-apiserver-$K8S_VERSION" out="$KAS_DIR.tmp.$$"
    local modflag ldflags major minor pkg=k8s.io/component-base/version
    GO="$(go_bin)"
    log "building kube-apiserver $K8S_VERSION (~6.5 min on an idle 2-core machine with cold Go caches, ~10 s warm)"
    rm -rf "$src" "$out"
    mkdir -p "$src" "$out"
    write_apiserver_module "$src"
    modflag="$(use_pin "$src" "kube-apiserver-$K8S_VERSION")"
    major="${K8S_VERSION#v}" && major="${major%%.*}"
    minor="${K8S_VERSION#v*.}" && minor="${minor%%.*}"
    # Without these the server reports v0.0.0, which clients and --version checks trip on.
    ldflags="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    if ! (cd "$src" && CGO_ENABLED=0 GOFLAGS="$modflag -buildvcs=false" \
        "$GO" build -trimpath -ldflags "$ldflags" -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver) >&2; then
        rm -rf "$out"
        die "building kube-apiserver $K8S_VERSION failed"
    fi
    stamp "kube-apiserver-$K8S_VERSION" "$K8S_VERSION" >"$out/.stamp"
    rm -rf "$KAS_DIR"
    mv "$out" "$KAS_DIR"
    pin_hint "$modflag" "$src" "kube-apiserver-$K8S_VERSION"
    log "built kube-apiserver $K8S_VERSION ($(du -h "$KAS_BIN" | cut -f1)) in $(since "$t0")s"
}

cmd_build() {
    local t0=$EPOCHREALTIME
    mkdir -p "$CACHE"
    # Clones share the cache: one build at a time, the others then find it done.
    exec 8>"$CACHE/.lock"
    if command -v flock >/dev/null 2>&1; then
        flock -w 1800 8 || log "warning: could not take $CACHE/.lock in 1800s; going on"
    fi
    build_etcd
    build_apiserver
    exec 8>&-
    log "build done in $(since "$t0")s: $("$KAS_BIN" --version), etcd $ETCD_VERSION"
}

# ---------------------------------------------------------------- processes

# What in a command line proves the process is this checkout's, not a recycled pid.
marker() {
    case "$1" in
        kube-apiserver) echo "--client-ca-file $PKI/ca.crt" ;;
        etcd) echo "--data-dir $(cat "$ETCD_DATA_FILE" 2>/dev/null || echo "$KDIR/?")" ;;
    esac
}

running_pid() {  # running_pid NAME -> the pid of our NAME process, if it runs
    local pid cmdline
    pid="$(cat "$KDIR/$1.pid" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    alive "$pid" || return 1
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
    [[ "$cmdline" == *"$(marker "$1")"* ]] || return 1
    echo "$pid"
}

# Runs a server in its own session, so a Ctrl-C meant for the caller (a terminal,
# pytest) does not kill it halfway and leave state behind; `stop` ends it. The
# inner shell writes its own pid before exec-ing, which stays right even when
# setsid has to fork. 8>&- 9>&-: the server must not hold our locks.
launch() {  # launch NAME COMMAND...
    local name=$1 pidfile="$KDIR/$1.pid" i
    shift
    rm -f "$pidfile"
    # shellcheck disable=SC2016  # $$ and $0 belong to the inner shell
    setsid bash -c 'echo $$ >"$0" && exec "$@"' "$pidfile" "$@" \
        >>"$LOGS/$name.log" 2>&1 </dev/null 8>&- 9>&- &
    for ((i = 0; i < 100; i++)); do
        [[ -s "$pidfile" ]] && return 0
        sleep 0.05
    done
    die "$name did not start"
}

stop_one() {  # stop_one NAME
    local pid
    if pid="$(running_pid "$1")"; then
        stop_pid "$pid" "$1"
        log "stopped $1 (pid $pid)"
    fi
    rm -f "$KDIR/$1.pid"
}

read_ports() {  # sets API_PORT ETCD_PORT PEER_PORT from the ports file
    [[ -f "$PORTS_FILE" ]] || return 1
    read -r API_PORT ETCD_PORT PEER_PORT <"$PORTS_FILE"
}

# ---------------------------------------------------------------- PKI and kubeconfig

gen_pki() {
    local f
    rm -rf "$PKI"
    mkdir -p "$PKI"
    # openssl's chatter (and its errors) go to logs/pki.log; the check below
    # notices a failed step by the files it should have written. ECDSA P-256
    # rather than RSA: key generation is instant, and every start makes five.
    (
        umask 077
        cd "$PKI"
        ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
        issue() {  # issue NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]
            printf '%s\n' basicConstraints=CA:FALSE keyUsage=critical,digitalSignature \
                "extendedKeyUsage=$3" ${4:+"subjectAltName=$4"} >"$1.ext"
            openssl req "${ec[@]}" -subj "$2" -keyout "$1.key" -out "$1.csr" &&
                openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
                    -days 3650 -extfile "$1.ext" -out "$1.crt"
        }
        openssl req -x509 "${ec[@]}" -days 3650 -subj /CN=kueuestream-test-ca \
            -addext basicConstraints=critical,CA:TRUE \
            -addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature \
            -keyout ca.key -out ca.crt
        # The SANs cover the address clients dial and the in-cluster names and first
        # service IP that the apiserver checks its own loopback client against.
        issue apiserver /CN=kube-apiserver serverAuth \
            IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
        # O=system:masters: the bootstrap RBAC policy binds that group to cluster-admin.
        issue admin /O=system:masters/CN=kueuestream-admin clientAuth
        # The apiserver will not start without a service-account signing key, even
        # with no controller-manager to mint tokens.
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out sa.key
        openssl pkey -in sa.key -pubout -out sa.pub
        openssl rand -hex 24 >admin.token
        openssl rand -hex 24 >controller.token
        # token,user,uid,"groups"
        printf '%s,kueuestream-admin,uid-kueuestream-admin,"system:masters"\n' "$(cat admin.token)" >tokens.csv
        printf '%s,kueuestream-controller,uid-kueuestream-controller,"kueuestream"\n' \
            "$(cat controller.token)" >>tokens.csv
        rm -f ./*.csr ./*.srl ./*.ext
    ) 2>>"$LOGS/pki.log" || true
    for f in ca.crt apiserver.crt admin.crt sa.pub admin.token controller.token tokens.csv; do
        if [[ ! -s "$PKI/$f" ]]; then
            tail -n 20 "$LOGS/pki.log" >&2 || true
            die "generating the PKI failed at $f ($(openssl version 2>/dev/null))"
        fi
    done
}

write_kubeconfig() {
    local ca cert key
    ca="$(base64 -w0 <"$PKI/ca.crt")"
    cert="$(base64 -w0 <"$PKI/admin.crt")"
    key="$(base64 -w0 <"$PKI/admin.key")"
    (umask 077 && cat >"$KUBECONFIG_FILE" <<EOF
# Written by scripts/kube.sh start; valid until the next stop.
apiVersion: v1
kind: Config
clusters:
- name: kueuestream-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $ca
users:
- name: kueuestream-admin
  user:
    token: $(cat "$PKI/admin.token")
- name: kueuestream-admin-cert
  user:
    client-certificate-data: $cert
    client-key-data: $key
- name: kueuestream-controller
  user:
    token: $(cat "$PKI/controller.token")
contexts:
- name: kueuestream-admin
  context: {cluster: kueuestream-test, user: kueuestream-admin}
- name: kueuestream-admin-cert
  context: {cluster: kueuestream-test, user: kueuestream-admin-cert}
- name: kueuestream-controller
  context: {cluster: kueuestream-test, user: kueuestream-controller}
current-context: kueuestream-admin
EOF
    )
}

# ---------------------------------------------------------------- start / stop

readyz() {
    [[ "$(curl -s --max-time 2 --cacert "$PKI/ca.crt" \
        -H "Authorization: Bearer $(cat "$PKI/admin.token" 2>/dev/null)" \
        "https://127.0.0.1:$API_PORT/readyz" 2>/dev/null)" == ok ]]
}

# /readyz says nothing of custom resources: after a restart their endpoints answer
# 429 "storage is (re)initializing" for a moment. Wait until every served version
# of every Established CRD lists.
wait_crds_served() {
    "$(python_bin "to probe the API server")" - "https://127.0.0.1:$API_PORT" "$PKI/ca.crt" "$PKI/admin.token" "$START_TIMEOUT" <<'PY'
import json, ssl, sys, time, urllib.error, urllib.request

server, ca, token_file, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
ctx = ssl.create_default_context(cafile=ca)
with open(token_file) as f:
    token = f.read().strip()

def get(path):
    req = urllib.request.Request(server + path, headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except OSError:
        return 0, b""

deadline = time.monotonic() + timeout
pending = None
while time.monotonic() < deadline:
    if pending is None:
        status, body = get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        if status == 200:
            pending = []
            for crd in json.loads(body)["items"]:
                conds = crd.get("status", {}).get("conditions", [])
                if not any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                    continue
                spec = crd["spec"]
                for v in spec["versions"]:
                    if v.get("served"):
                        pending.append(f"/apis/{spec['group']}/{v['name']}/{spec['names']['plural']}?limit=1")
    if pending is not None:
        pending = [p for p in pending if get(p)[0] != 200]
        if not pending:
            sys.exit(0)
    time.sleep(0.1)
print("custom resources still not served:", *(pending or ["(CRD list failed)"]), file=sys.stderr)
sys.exit(1)
PY
}

start_etcd() {
    local t0=$EPOCHREALTIME data i
    data="$(cat "$ETCD_DATA_FILE")"
    # --unsafe-no-fsync: the data is thrown away at stop, and fsync dominates on slow disks.
    launch etcd "$ETCD_BIN" --name kueuestream-test --data-dir "$data" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
        --initial-cluster "kueuestream-test=http://127.0.0.1:$PEER_PORT" \
        --quota-backend-bytes $((2 * 1024 * 1024 * 1024)) --unsafe-no-fsync \
        --log-level warn --logger zap
    for ((i = 0; i < 200; i++)); do
        if ETCDCTL_API=3 "$ETCDCTL_BIN" --endpoints "127.0.0.1:$ETCD_PORT" --command-timeout 2s \
            endpoint health >/dev/null 2>&1; then
            log "etcd healthy on 127.0.0.1:$ETCD_PORT in $(since "$t0")s"
            return 0
        fi
        if ! running_pid etcd >/dev/null; then
            log "etcd exited during startup; last log lines:"
            tail -n 20 "$LOGS/etcd.log" >&2 || true
            return 1
        fi
        sleep 0.1
    done
    log "etcd not healthy after 20s"
    return 1
}

start_apiserver() {
    local t0=$EPOCHREALTIME deadline
    local -a extra=()
    # shellcheck disable=SC2206  # word-splitting the extra flags is the point
    [[ -n "${APISERVER_EXTRA_ARGS:-}" ]] && extra=($APISERVER_EXTRA_ARGS)
    # --runtime-config: 1.34 serves only resource.k8s.io/v1 unless told; DRA objects
    #   are read and written as v1beta1/v1beta2 too.
    # --disable-admission-plugins ServiceAccount: no controller creates the default
    #   ServiceAccount, and without it no Pod could be created.
    # --endpoint-reconciler-type none: 127.0.0.1 may not be the `kubernetes` Service's
    #   endpoint (loopback), and the reconciler would log that error forever.
    launch kube-apiserver "$KAS_BIN" \
        --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
        --cert-dir "$PKI/apiserver-certs" \
        --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
        --client-ca-file "$PKI/ca.crt" --token-auth-file "$PKI/tokens.csv" \
        --authorization-mode RBAC \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
        --service-cluster-ip-range 10.0.0.0/24 \
        --runtime-config resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true \
        --disable-admission-plugins ServiceAccount \
        --endpoint-reconciler-type none \
        --profiling=false \
        "${extra[@]}"
    deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        if readyz; then
            log "kube-apiserver ready on https://127.0.0.1:$API_PORT in $(since "$t0")s"
            return 0
        fi
        if ! running_pid kube-apiserver >/dev/null; then
            log "kube-apiserver exited during startup; last log lines:"
            tail -n 30 "$LOGS/kube-apiserver.log" >&2 || true
            return 1
        fi
        sleep 0.2
    done
    log "kube-apiserver not ready after ${START_TIMEOUT}s; last log lines:"
    tail -n 30 "$LOGS/kube-apiserver.log" >&2 || true
    return 1
}

# etcd's data goes to tmpfs when there is room: throwaway state, no disk I/O. A
# Docker-sized /dev/shm (64 MiB) cannot even hold etcd's preallocated WAL.
make_etcd_data() {
    local dir=""
    if [[ -d /dev/shm && -w /dev/shm ]] &&
        (($(df -Pk /dev/shm | awk 'NR == 2 { print $4 }') > 1024 * 1024)); then
        dir="$(mktemp -d /dev/shm/kueuestream-etcd.XXXXXX)"
    else
        dir="$KDIR/etcd-data"
        mkdir -p "$dir"
    fi
    chmod 700 "$dir"
    echo "$dir" >"$ETCD_DATA_FILE"
}

remove_etcd_data() {
    local dir
    dir="$(cat "$ETCD_DATA_FILE" 2>/dev/null || true)"
    case "$dir" in
        /dev/shm/kueuestream-etcd.* | "$KDIR/etcd-data") rm -rf "$dir" ;;
    esac
    rm -f "$ETCD_DATA_FILE"
}

# Everything but the logs of the last run: its secrets go with it.
clean_state() {
    stop_one kube-apiserver
    stop_one etcd
    remove_etcd_data
    rm -rf "$PKI" "$KUBECONFIG_FILE" "$PORTS_FILE"
}

start_once() {
    read -r API_PORT ETCD_PORT PEER_PORT <<<"$(free_ports 3)"
    echo "$API_PORT $ETCD_PORT $PEER_PORT" >"$PORTS_FILE"
    write_kubeconfig
    make_etcd_data
    start_etcd && start_apiserver
}

cmd_start() {
    local t0=$EPOCHREALTIME attempt
    if read_ports && running_pid kube-apiserver >/dev/null && running_pid etcd >/dev/null && readyz; then
        log "already running (https://127.0.0.1:$API_PORT)"
        echo "$KUBECONFIG_FILE"
        return 0
    fi
    need curl openssl
    if ! etcd_built || ! apiserver_built; then cmd_build; fi
    clean_state
    rm -rf "$LOGS"
    mkdir -p "$LOGS"
    gen_pki
    # Retry: a port picked as free can be taken before a server binds it.
    for attempt in 1 2 3; do
        if start_once; then
            log "ready in $(since "$t0")s; kubeconfig: $KUBECONFIG_FILE"
            echo "$KUBECONFIG_FILE"
            return 0
        fi
        log "start attempt $attempt failed"
        stop_one kube-apiserver
        stop_one etcd
        remove_etcd_data
    done
    clean_state
    die "could not start the API server (logs in $LOGS)"
}

cmd_stop() {
    clean_state
    log "stopped (logs of the last run in $LOGS)"
}

cmd_restart_apiserver() {
    local t0=$EPOCHREALTIME
    if ! read_ports || ! running_pid etcd >/dev/null; then
        die "not running (scripts/kube.sh start)"
    fi
    stop_one kube-apiserver
    start_apiserver || die "kube-apiserver did not come back (logs in $LOGS)"
    wait_crds_served || die "custom resources not served after the restart"
    log "restarted kube-apiserver in $(since "$t0")s"
}

cmd_stop_apiserver() {
    if ! read_ports || ! running_pid etcd >/dev/null; then
        die "not running (scripts/kube.sh start)"
    fi
    stop_one kube-apiserver
}

rss() { awk '/^VmRSS/ { printf "%.0f MiB", $2 / 1024 }' "/proc/$1/status" 2>/dev/null; }

cmd_status() {
    local name pid rc=0 lines=()
    read_ports || { echo "stopped"; return 1; }
    for name in etcd kube-apiserver; do
        if pid="$(running_pid "$name")"; then
            lines+=("$name: pid $pid, rss $(rss "$pid")")
        else
            lines+=("$name: not running")
            rc=1
        fi
    done
    if ((rc == 0)) && ! readyz; then
        lines+=("readyz: not ok")
        rc=1
    fi
    if ((rc == 0)); then
        echo "running https://127.0.0.1:$API_PORT $KUBECONFIG_FILE"
    else
        echo "stopped"
    fi
    printf '%s\n' "${lines[@]}"
    return "$rc"
}

cmd_env() {
    if ! read_ports || ! running_pid kube-apiserver >/dev/null; then
        die "not running (scripts/kube.sh start)"
    fi
    printf 'export KUEUESTREAM_KUBECONFIG=%q\n' "$KUBECONFIG_FILE"
    printf 'export KUBECONFIG=%q\n' "$KUBECONFIG_FILE"
    printf 'export KUEUESTREAM_KUBE_SERVER=%q\n' "https://127.0.0.1:$API_PORT"
    printf 'export KUEUESTREAM_KUBE_CA=%q\n' "$PKI/ca.crt"
    printf 'export KUEUESTREAM_KUBE_ADMIN_TOKEN_FILE=%q\n' "$PKI/admin.token"
    printf 'export KUEUESTREAM_KUBE_CONTROLLER_TOKEN_FILE=%q\n' "$PKI/controller.token"
    printf 'export KUEUESTREAM_ETCDCTL=%q ETCDCTL_API=3 ETCDCTL_ENDPOINTS=%q\n' \
        "$ETCDCTL_BIN" "127.0.0.1:$ETCD_PORT"
}

lock() { take_lock "$KDIR" 1800; }

main() {
    case "${1:-}" in
        build) cmd_build ;;
        start) lock; cmd_start ;;
        stop) lock; cmd_stop ;;
        status) cmd_status ;;
        restart-apiserver) lock; cmd_restart_apiserver ;;
        stop-apiserver) lock; cmd_stop_apiserver ;;
        env) cmd_env ;;
        *)
            echo "usage: [KUBE_INSTANCE=NAME] $0 {build|start|stop|status|restart-apiserver|stop-apiserver|env}" >&2
            return 2
            ;;
    esac
}

# On one line, read whole before it runs: editing this file while a server
# starts cannot make bash execute half-read fragments.
main "$@"; exit $?

# shellcheck shell=bash
# Shared by scripts/kafka.sh and scripts/kube.sh, which source it after setting
# ROOT (the repo root) and SCRIPT (their own name, for messages).

log() { echo "$SCRIPT: $*" >&2; }
die() { log "error: $*"; exit 1; }

python_bin() {  # python_bin WHAT_FOR -> a python3 that can run the helpers
    local p
    for p in "$ROOT/.venv/bin/python" python3 python3.11; do
        if command -v "$p" >/dev/null 2>&1; then echo "$p"; return 0; fi
    done
    die "python3 is needed ($1)"
}

# Is the process alive (a zombie waiting to be reaped counts as dead)?
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    local state
    state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo X)"
    [[ "$state" != Z && "$state" != X ]]
}

stop_pid() {  # stop_pid PID LABEL: TERM, up to 30 s for a clean shutdown, then KILL
    local pid="$1" i
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
        alive "$pid" || return 0
        sleep 0.2
    done
    log "$2 (pid $pid) still alive after 30s; killing"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do alive "$pid" || break; sleep 0.1; done
}

free_ports() {  # free_ports N -> N distinct free TCP ports on 127.0.0.1
    "$(python_bin "to pick free ports")" - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

# One start/stop at a time per checkout: two test sessions starting at once
# would otherwise wipe each other's state.
take_lock() {  # take_lock DIR SECONDS
    mkdir -p "$1"
    exec 9>"$1/lock"
    if command -v flock >/dev/null 2>&1; then
        flock -w "$2" 9 || log "warning: could not take $1/lock in $2s; going on"
    fi
}

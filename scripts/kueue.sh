#!/usr/bin/env bash
# Upstream Kueue's controller manager for the tests of a MultiKueue worker that runs
# upstream Kueue: built from its Go module (the module proxy is the only source),
# never committed, cached per user like scripts/kube.sh's binaries.
#
#   scripts/kueue.sh build    builds sigs.k8s.io/kueue/cmd/kueue at VERSION into the cache
#                             (idempotent); prints the binary's path on stdout
#   scripts/kueue.sh path     prints the binary's path if it is built (exit 1 if not)
#   scripts/kueue.sh crds     prints the folder of upstream's CRD manifests in the Go module
#                             cache (config/components/crd/bases/*.yaml); `build` first
#
# Files: $KUEUESTREAM_KUEUE_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/kueuestream/kueue)
#   kueue-VERSION/kueue: the binary, with a .stamp naming the version it was built from
# Environment knobs: GO (the go command).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SCRIPT=kueue.sh
# shellcheck source=scripts/lib/processes.sh
source "$ROOT/scripts/lib/processes.sh"
export LC_NUMERIC=C

# The one place the upstream version is pinned.
KUEUE_VERSION=v0.19.2
MODULE=sigs.k8s.io/kueue
CACHE="${KUEUESTREAM_KUEUE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueuestream/kueue}"
OUT_DIR="$CACHE/kueue-$KUEUE_VERSION"
BIN="$OUT_DIR/kueue"

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

go_bin() {
    if [[ -n "${GO:-}" ]]; then echo "$GO"; return 0; fi
    if command -v go >/dev/null 2>&1; then command -v go; return 0; fi
    if [[ -x /usr/local/go/bin/go ]]; then echo /usr/local/go/bin/go; return 0; fi
    die "go not found: building upstream Kueue v0.19.2 needs Go 1.26 or newer (https://go.dev/doc/install); or set GO=/path/to/go"
}

cmd_build() {
    local t0=$EPOCHREALTIME out="$OUT_DIR.tmp.$$" src="$CACHE/src/kueue-$KUEUE_VERSION" go upstream
    mkdir -p "$CACHE"
    # Clones share the cache: one build at a time, the others then find it done.
    exec 8>"$CACHE/.lock"
    if command -v flock >/dev/null 2>&1; then
        flock -w 1800 8 || log "warning: could not take $CACHE/.lock in 1800s; going on"
    fi
    if [[ -x "$BIN" && "$(cat "$OUT_DIR/.stamp" 2>/dev/null)" == "$KUEUE_VERSION" ]]; then
        log "kueue $KUEUE_VERSION already built ($BIN)"
        echo "$BIN"
        return 0
    fi
    go="$(go_bin)"
    log "building kueue $KUEUE_VERSION ($MODULE/cmd/kueue, ~6.5 min on an idle 2-core machine with cold Go caches (750 s of CPU), seconds after)"
    # Under the lock no other build runs: a .tmp left here is from one that was killed.
    rm -rf "$OUT_DIR".tmp.* "$src"
    mkdir -p "$src" "$out"
    # `go install MODULE/cmd/kueue@VERSION` would be the direct way, but it asks the
    # module proxy for the module's version list (to report a deprecation), which a
    # proxy may refuse; a throwaway main module requiring the one version builds the
    # same package from the same go.mod (upstream's has no replace directives).
    if ! (cd "$src" && "$go" mod download "$MODULE@$KUEUE_VERSION") >&2; then
        rm -rf "$out"
        die "could not download $MODULE@$KUEUE_VERSION"
    fi
    upstream="$("$go" env GOMODCACHE)/$MODULE@$KUEUE_VERSION/go.mod"
    {
        echo "module kueuestream.local/kueue-build"
        echo
        grep -m1 '^go ' "$upstream"
        echo
        echo "require $MODULE $KUEUE_VERSION"
    } >"$src/go.mod"
    echo 'package build' >"$src/build.go"
    # Upstream's go.sum: every module is checked against upstream's own hashes (the
    # checksum database need not know a pre-release such as sigs.k8s.io/scheduler-library).
    cp "$(dirname "$upstream")/go.sum" "$src/go.sum"
    chmod u+w "$src/go.sum"
    if ! (cd "$src" && CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath -buildvcs=false" \
        "$go" build -ldflags '-s -w' -o "$out/kueue" "$MODULE/cmd/kueue") >&2; then
        rm -rf "$out"
        die "building kueue $KUEUE_VERSION failed"
    fi
    echo "$KUEUE_VERSION" >"$out/.stamp"
    rm -rf "$OUT_DIR"
    mv "$out" "$OUT_DIR"
    log "built kueue $KUEUE_VERSION ($(du -h "$BIN" | cut -f1)) in $(since "$t0")s"
    echo "$BIN"
}

cmd_path() {
    [[ -x "$BIN" && "$(cat "$OUT_DIR/.stamp" 2>/dev/null)" == "$KUEUE_VERSION" ]] ||
        die "kueue $KUEUE_VERSION is not built (scripts/kueue.sh build)"
    echo "$BIN"
}

cmd_crds() {
    local go dir
    go="$(go_bin)"
    dir="$("$go" env GOMODCACHE)/$MODULE@$KUEUE_VERSION/config/components/crd/bases"
    compgen -G "$dir/*.yaml" >/dev/null || die "no CRDs in $dir (scripts/kueue.sh build first)"
    echo "$dir"
}

main() {
    case "${1:-}" in
        build) cmd_build ;;
        path) cmd_path ;;
        crds) cmd_crds ;;
        *)
            echo "usage: $0 {build|path|crds}" >&2
            return 2
            ;;
    esac
}

# On one line, read whole before it runs: editing this file while it builds
# cannot make bash execute half-read fragments.
main "$@"; exit $?

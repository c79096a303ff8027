#!/usr/bin/env bash
# Installs what ferry needs to build and test on a fresh Debian 12 machine, and nothing twice.
#   scripts/setup.sh            everything (build deps, test servers, libchdb 26.7 and 26.5,
#                               s3rver, the ClickHouse JS client)
#   scripts/setup.sh --build    only what compiling needs
#   scripts/setup.sh --chdb V   only libchdb V (26.7 or 26.5; 26.5 is the older engine the
#                               mixed-version test upgrades from, tests/integration/mixed_version.sh)
# Debian packages come from apt-get; npm packages are cached outside the work tree under
# $FERRY_CACHE (default ~/.cache/ferry) and checked against their pinned integrity hash.
set -euo pipefail

FERRY_CACHE=${FERRY_CACHE:-$HOME/.cache/ferry}
CHDB_PKG=@chdb/lib-linux-x64-gnu
CHDB_VERSION=26.7.3-stable.1
CHDB_INTEGRITY=sha512-XP97mMqnc5tZpKQywR8N7cLTsHNiTmHr30pC5mzo3jWmukjKn2IBa60c2B/gWUNcuFjOMjWoorQICCqBVj5wpw==
# the older engine (ClickHouse 26.5.1.1; no streaming-insert API, ferry-node spools its inserts)
CHDB_OLD_VERSION=26.5.3
CHDB_OLD_INTEGRITY=sha512-fPrLmRt5Moor9yGz4mazbrNje4t7X9KB2mTGkXFWRxRBs2iKy8yh6jx11xsa0Qr3iDFMU/yHqd+bVdYJXu3QaQ==
S3RVER_VERSION=3.7.1
# the official ClickHouse JS client, a real client for tests/integration/router_auth.sh
CHJS_PKG=@clickhouse/client
CHJS_VERSION=1.23.1
CHJS_INTEGRITY=sha512-vs3/Zc1dHvT171btW5nMoPsPCJ6QVJ5pp7obxzO5sjqwFx/jjz9wwCAqcFOdc2DhprugDBaVn+4dVY8hG3A9nw==

BUILD_DEBS=(cmake ninja-build pkg-config gcc make clang libclang-rt-14-dev
            libcurl4-openssl-dev libssl-dev libsqlite3-dev libjansson-dev
            libmicrohttpd-dev libxxhash-dev libcmocka-dev libzookeeper-mt-dev liblz4-dev
            libexpat1-dev)
TEST_DEBS=(zookeeper openjdk-17-jre-headless nodejs npm python3 python3-botocore
           clickhouse-server curl procps jq e2fsprogs util-linux sqlite3 prometheus chromium)

log() { printf 'setup: %s\n' "$*" >&2; }

missing_debs() {
    local p out=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out+=("$p")
    done
    printf '%s\n' "${out[@]}"
}

install_debs() {
    local -a need
    mapfile -t need < <(missing_debs "$@")
    [ "${#need[@]}" -eq 0 ] || [ -z "${need[0]}" ] && return 0
    # nodejs/npm may come from elsewhere on some machines: a working binary is enough.
    local -a filtered=()
    for p in "${need[@]}"; do
        case "$p" in
            nodejs) command -v node >/dev/null || filtered+=("$p") ;;
            npm) command -v npm >/dev/null || filtered+=("$p") ;;
            python3) command -v python3 >/dev/null || filtered+=("$p") ;;
            *) filtered+=("$p") ;;
        esac
    done
    [ "${#filtered[@]}" -eq 0 ] && return 0
    log "installing Debian packages: ${filtered[*]}"
    local SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    if ! $SUDO apt-get install -y -q --no-install-recommends "${filtered[@]}" >/tmp/ferry-apt.$$.log 2>&1; then
        $SUDO apt-get update -q >/dev/null 2>&1 || true
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${filtered[@]}" \
            >/tmp/ferry-apt.$$.log 2>&1 || { cat /tmp/ferry-apt.$$.log >&2; log "apt-get install failed"; exit 1; }
    fi
    rm -f /tmp/ferry-apt.$$.log
}

# npm pack verifies the tarball against the registry's integrity; we also check it against the
# value pinned above, so a changed upload is refused rather than trusted.
#   fetch_chdb [VERSION INTEGRITY]   (default: the 26.7 build)
fetch_chdb() {
    local version=${1:-$CHDB_VERSION} integrity=${2:-$CHDB_INTEGRITY}
    local dir="$FERRY_CACHE/chdb-$version"
    if [ -s "$dir/libchdb.so" ] && [ "$(cat "$dir/.verified" 2>/dev/null)" = "$integrity" ]; then
        return 0
    fi
    log "fetching $CHDB_PKG@$version (about 170 MB, once) into $dir"
    mkdir -p "$dir"
    local tmp; tmp=$(mktemp -d "$FERRY_CACHE/chdb-dl.XXXXXX")
    (cd "$tmp" && npm pack --silent "$CHDB_PKG@$version" >/dev/null)
    local tgz; tgz=$(ls "$tmp"/*.tgz)
    local got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
    if [ "$got" != "$integrity" ]; then
        rm -rf "$tmp"; log "integrity mismatch for $CHDB_PKG@$version: got $got"; exit 1
    fi
    tar -xzf "$tgz" -C "$tmp" package/libchdb.so
    mv "$tmp/package/libchdb.so" "$dir/libchdb.so"
    echo "$integrity" > "$dir/.verified"
    rm -rf "$tmp"
}

fetch_s3rver() {
    local dir="$FERRY_CACHE/s3rver-$S3RVER_VERSION"
    [ -f "$dir/node_modules/s3rver/bin/s3rver.js" ] && return 0
    log "installing s3rver@$S3RVER_VERSION into $dir"
    mkdir -p "$dir"
    (cd "$dir" && { [ -f package.json ] || echo '{"name":"ferry-s3rver","private":true}' > package.json; } &&
        npm install --silent --no-audit --no-fund "s3rver@$S3RVER_VERSION" >/dev/null)
}

# npm install checks the tarball against the registry's integrity and records it in the lock
# file; that record must equal the value pinned above (it has no dependencies of its own).
fetch_clickhouse_js() {
    local dir="$FERRY_CACHE/clickhouse-js-$CHJS_VERSION"
    if [ -f "$dir/node_modules/$CHJS_PKG/package.json" ] && [ -f "$dir/.verified" ]; then return 0; fi
    log "installing $CHJS_PKG@$CHJS_VERSION into $dir"
    mkdir -p "$dir"
    (cd "$dir" && { [ -f package.json ] || echo '{"name":"ferry-clickhouse-js","private":true}' > package.json; } &&
        npm install --silent --no-audit --no-fund --save-exact "$CHJS_PKG@$CHJS_VERSION" >/dev/null)
    local got
    got=$(node -e 'const l = require(process.argv[1]); const p = l.packages["node_modules/" + process.argv[2]];
                   process.stdout.write(p ? p.integrity + " " + Object.keys(l.packages).length : "missing")' \
          "$dir/package-lock.json" "$CHJS_PKG")
    if [ "$got" != "$CHJS_INTEGRITY 2" ]; then
        rm -rf "$dir"; log "integrity mismatch for $CHJS_PKG (or unexpected dependencies): got $got"; exit 1
    fi
    echo "$CHJS_INTEGRITY" > "$dir/.verified"
}

mode=${1:-all}
if [ "$mode" = "--chdb" ]; then
    mkdir -p "$FERRY_CACHE"
    case "${2:-}" in
        26.7|"$CHDB_VERSION") fetch_chdb ;;
        26.5|"$CHDB_OLD_VERSION") fetch_chdb "$CHDB_OLD_VERSION" "$CHDB_OLD_INTEGRITY" ;;
        *) log "--chdb wants 26.7 or 26.5, not '${2:-}'"; exit 2 ;;
    esac
    log "ready (cache: $FERRY_CACHE)"
    exit 0
fi
install_debs "${BUILD_DEBS[@]}"
if [ "$mode" != "--build" ]; then
    install_debs "${TEST_DEBS[@]}"
    mkdir -p "$FERRY_CACHE"
    fetch_chdb
    fetch_chdb "$CHDB_OLD_VERSION" "$CHDB_OLD_INTEGRITY"
    fetch_s3rver
    fetch_clickhouse_js
fi
log "ready (cache: $FERRY_CACHE)"

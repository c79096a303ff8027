# `make install`'s files (cmake --install into a DESTDIR): the binary runs, ferry(1) renders and
# has a section per command, the systemd units pass `systemd-analyze verify` against the staged
# tree, the example config and the docs are there.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
D=$T/root
DESTDIR=$D cmake --install "$FERRY_BUILD_DIR" --prefix /usr >"$T/install.out" 2>&1 ||
    fail "cmake --install: $(tail -5 "$T/install.out")"
for f in usr/bin/ferry usr/share/man/man1/ferry.1 usr/lib/systemd/system/ferry-agent@.service \
         usr/lib/systemd/system/ferry-router.service usr/lib/systemd/system/ferry-coordinator.service \
         usr/share/doc/ferry/ferry.conf.example usr/share/doc/ferry/ferry-rules.yml \
         usr/share/doc/ferry/operations.md; do
    [ -s "$D/$f" ] || fail "not installed: $f"
done
"$D/usr/bin/ferry" version | grep -q '^ferry ' || fail "the installed binary does not run"
man -l "$D/usr/share/man/man1/ferry.1" >"$T/man.txt" 2>"$T/man.err" || fail "man: $(cat "$T/man.err")"
grep -q 'FERRY(1)' "$T/man.txt" || fail "ferry(1) does not render"
n_cmds=$("$FERRY_BIN" help | awk '/^commands:/{f=1; next} f && !NF {exit} f' | wc -l)
assert_eq "$n_cmds" "$(grep -c '^\.SS' "$D/usr/share/man/man1/ferry.1")" "a man section per command"
ok "installed: binary, ferry(1) with $n_cmds command sections, units, example config, docs"
# the units are checked against the staged tree: a ferry user and a unit for clickhouse-server
# exist there as on a real host
mkdir -p "$D/etc" "$D/etc/ferry"
printf 'root:x:0:0::/root:/bin/sh\nferry:x:999:999::/var/lib/ferry:/usr/sbin/nologin\nclickhouse:x:998:998::/var/lib/clickhouse:/usr/sbin/nologin\n' >"$D/etc/passwd"
printf 'root:x:0:\nferry:x:999:\nclickhouse:x:998:\n' >"$D/etc/group"
# and the host's standard targets (sysinit, network-online, ...), which the units order after
for t in /lib/systemd/system/*.target /usr/lib/systemd/system/*.target; do
    [ -e "$t" ] && cp -n "$t" "$D/usr/lib/systemd/system/" 2>/dev/null || true
done
for u in ferry-router.service ferry-coordinator.service ferry-agent@node1.service; do
    systemd-analyze verify --man=no --root="$D" "$D/usr/lib/systemd/system/${u/@node1/@}" >"$T/verify.out" 2>&1 || true
    # only problems of our units count: the staged tree has no systemd of its own
    if grep -v -e 'clickhouse-server.service' -e 'network-online.target' -e "Failed to load" \
            -e 'is not executable' "$T/verify.out" | grep -qi -e error -e 'unknown' -e 'invalid' -e 'failed'; then
        fail "systemd-analyze verify $u: $(cat "$T/verify.out")"
    fi
done
grep -q '^NoNewPrivileges=yes' "$D/usr/lib/systemd/system/ferry-router.service" || fail "router unit not hardened"
grep -q '^ProtectSystem=strict' "$D/usr/lib/systemd/system/ferry-agent@.service" || fail "agent unit not hardened"
ok "systemd units pass systemd-analyze verify (hardened: dedicated user, NoNewPrivileges, ProtectSystem=strict, restart on failure)"
done_testing

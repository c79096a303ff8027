# The soak's end checks and report (sourced by tests/soak/soak.sh after the settle phase).
#   run_checks   sweeps (report, delete old orphans, report again), then the rows on every node
#                and through both routers (tests/soak/verify.py), the journals, the S3 proxy's
#                delete counts, sanitizer reports, unexpected exits; results in $T/inv/*.json
#   report       the report as JSON: stdout and $SOAK_REPORT

inv() { # inv NAME OK(true|false) JSON-DETAIL (through a file: a detail may be too long for argv)
    local d=${3:-}
    [ -n "$d" ] || d='{}'
    printf '%s' "$d" >"$T/inv/.detail"
    jq -n --argjson ok "${2:-false}" --slurpfile d "$T/inv/.detail" '{ok: $ok} + $d[0]' >"$T/inv/$1.json"
    rm -f "$T/inv/.detail"
}

# dump_node NODE URL: every row of the writer's ids on NODE into $T/dump.NODE.tsv. When the one
# query fails (a part ClickHouse cannot read stops it, and every row behind that part would count
# as missing), the node is dumped part by part instead: the readable parts' rows, and each
# unreadable part as "name<TAB>rows<TAB>modification time<TAB>ClickHouse's error" in
# $T/unreadable.NODE.tsv, so the report says which rows are behind a broken part and which are
# really gone.
# A failure after the first rows comes with HTTP 200 and the error at the end of the body (the
# headers were sent): the body is checked too.
rows_ok() { # FILE: no error at the end of a TSV answer
    ! tail -c 2000 "$1" | grep -q -e '^__exception__' -e 'DB::Exception'
}

dump_node() {
    local n=$1 u=$2 q="SELECT id, tenant, day, split FROM events WHERE id >= $ID_BASE"
    : >"$T/unreadable.$n.tsv"
    curl -sS --fail-with-body --max-time 600 "$u/" --data-binary "$q FORMAT TSV" >"$T/dump.$n.tsv" &&
        rows_ok "$T/dump.$n.tsv" && return 0
    ev problem "dump of $n failed: $(tail -c 300 "$T/dump.$n.tsv" | tr '\n' ' ')"
    : >"$T/dump.$n.tsv"
    local part rows mt
    curl -sS --fail-with-body --max-time 60 "$u/" --data-binary "SELECT name, rows, modification_time
        FROM system.parts WHERE active AND database = currentDatabase() AND table = 'events'
        ORDER BY name FORMAT TSV" >"$T/parts.$n.tsv" ||
        { ev problem "parts of $n not listed: $(tail -c 300 "$T/parts.$n.tsv")"; return 0; }
    while IFS=$'\t' read -r part rows mt; do
        if curl -sS --fail-with-body --max-time 120 "$u/" --data-binary \
            "$q AND _part = '$part' FORMAT TSV" >"$T/dump.part" 2>/dev/null && rows_ok "$T/dump.part"; then
            cat "$T/dump.part" >>"$T/dump.$n.tsv"
        else
            printf '%s\t%s\t%s\t%s\n' "$part" "$rows" "$mt" \
                "$(tail -c 400 "$T/dump.part" | tr '\t\n' '  ')" >>"$T/unreadable.$n.tsv"
        fi
    done <"$T/parts.$n.tsv"
    rm -f "$T/dump.part"
    ev problem "$n: $(wc -l <"$T/unreadable.$n.tsv") part(s) ClickHouse cannot read"
}

run_checks() {
    mkdir -p "$T/inv"
    local rc n u k

    # -- the sweep: complete, no dangling pointer, no drift; old orphans deleted by the janitor
    rc=0; F sweep --json >"$T/sweep1.json" 2>"$T/sweep1.err" || rc=$?
    ev check "sweep rc=$rc"
    # an orphan older than the grace when the deleting sweep starts must be gone after it; one
    # younger then is left to a later sweep, though it may be older than the grace by the check
    local t_delete; t_delete=$(date +%s)
    rc=0; F sweep --delete-orphans --min-age "${GRACE_S}s" --json >"$T/sweep2.json" 2>"$T/sweep2.err" || rc=$?
    ev check "sweep_delete rc=$rc deleted=$(jq .deleted "$T/sweep2.json" 2>/dev/null)"
    rc=0; F sweep --json >"$T/sweep3.json" 2>"$T/sweep3.err" || rc=$?
    local now=$t_delete
    local s=$T/sweep3.json
    if jq -e . "$s" >/dev/null 2>&1; then
        inv sweep_complete "$(jq .complete "$s")" "$(jq -c '{n_problems: (.problems | length), problems: .problems[:5]}' "$s")"
        inv no_dangling "$(jq '.dangling | length == 0' "$s")" "$(jq -c '{dangling: .dangling_details[:5]}' "$s")"
        inv no_drift "$(jq '.drift | length == 0' "$s")" "$(jq -c '{drift: .drift[:5]}' "$s")"
        inv no_old_orphans "$(jq --argjson now "$now" --argjson g "$GRACE_S" '[.orphan_details[] | select(.mtime < $now - $g)] | length == 0' "$s")" \
            "$(jq -c --argjson now "$now" --argjson g "$GRACE_S" --slurpfile s1 "$T/sweep1.json" --slurpfile s2 "$T/sweep2.json" \
                '{grace_s: $g, orphans_before: ($s1[0].orphans | length), deleted: $s2[0].deleted, delete_failed: $s2[0].delete_failed,
                  deletion_skipped: $s2[0].deletion_skipped, orphans_after: (.orphans | length),
                  old_after: [.orphan_details[] | select(.mtime < $now - $g)][:5]}' "$s")"
    else
        for k in sweep_complete no_dangling no_drift no_old_orphans; do
            inv $k false "$(jq -nc --arg e "$(tail -c 600 "$T/sweep3.err")" '{error: $e}')"
        done
    fi

    # -- journals: no move and no job left unfinished
    F catalog export --json >"$T/catalog.json" 2>"$T/export.err" || F catalog export >"$T/catalog.json" 2>>"$T/export.err"
    inv no_unfinished "$(jq '([.moves[]?, .jobs[]? | select(.state != "DONE" and .state != "FAILED")] | length) == 0' "$T/catalog.json")" \
        "$(jq -c '{moves: ([.moves[]?] | group_by(.state) | map({(.[0].state): length}) | add),
                   jobs: ([.jobs[]?] | group_by(.state) | map({(.[0].state): length}) | add),
                   unfinished: [.moves[]?, .jobs[]? | select(.state != "DONE" and .state != "FAILED") | {id: (.id // .name), state, detail}][:5]}' "$T/catalog.json")"

    # -- the rows: every node read directly, both routers, against the writer's log
    local dumps=()
    for n in $NODES; do
        dump_node "$n" "$(lab_url "$L" "$n")"
        dumps+=(--dump "$n=$T/dump.$n.tsv" --unreadable "$n=$T/unreadable.$n.tsv")
    done
    : >"$T/routes.tsv"
    for t in ${TENANTS//,/ }; do
        F route --tenant "$t" --json | jq -r --arg t "$t" '.slices[] | "\($t)\t\(.split)\t\(.shards | join(","))"' >>"$T/routes.tsv"
    done
    local reads=() refok=true
    for k in 1 2; do
        u=$R1; [ $k = 1 ] || u=$R2
        curl -sS --fail-with-body --max-time 300 "$u/" --data-binary \
            "SELECT tenant, count(), uniqExact(id), sum(id) FROM events WHERE id >= $ID_BASE GROUP BY tenant ORDER BY tenant FORMAT TSV" \
            >"$T/read.router$k.tsv" || true
        reads+=(--router-read "$T/read.router$k.tsv")
        curl -sS --fail-with-body --max-time 300 "$u/" --data-binary "$REFQ" >"$T/ref.router$k.tsv" || true
        cmp -s "$T/ref.router$k.tsv" "$T/reference.tsv" || refok=false
    done
    inv reference_reads_end "$refok" "$(jq -nc --arg a "$(head -c 300 "$T/ref.router1.tsv")" --arg b "$(head -c 300 "$T/ref.router2.tsv")" '{router1: $a, router2: $b}')"
    $PY "$SOAKDIR/verify.py" --acked "$T/acked.tsv" --unacked "$T/unacked.tsv" --routes "$T/routes.tsv" \
        "${dumps[@]}" "${reads[@]}" --out "$T/verify.json" 2>"$T/verify.err" || true
    if jq -e . "$T/verify.json" >/dev/null 2>&1; then
        for k in acked_present no_phantom once_per_replica on_route row_intact router_reads; do
            jq -c ".$k" "$T/verify.json" >"$T/inv/$k.json"
        done
    else
        inv rows_verified false "$(jq -nc --arg e "$(cat "$T/verify.err")" '{error: $e}')"
    fi

    # -- during the soak: no wrong answer from a router; the writer got rows in
    inv reads_never_wrong "$(jq '.wrong == 0' "$T/reader.json")" "$(jq -c '{reads_ok: .ok, errors: .error, wrong, wrong_samples: .wrong_samples[:3]}' "$T/reader.json")"
    inv writer_progress "$(jq '.rows > 0' "$T/writer.json")" "$(jq -c '{batches, rows, gave_up}' "$T/writer.json")"

    # -- object store: the clickhouse and uploader roles never sent a delete
    s3policy_counts >"$T/s3counts.json"
    inv s3_no_deletes_by_clickhouse_uploader \
        "$(jq '[.counts.clickhouse.DELETE // {}, .counts.uploader.DELETE // {} | .[]] | add // 0 | . == 0' "$T/s3counts.json")" \
        "$(jq -c '{clickhouse: (.counts.clickhouse.DELETE // {}), uploader: (.counts.uploader.DELETE // {}), janitor: (.counts.janitor.DELETE // {}), requests}' "$T/s3counts.json")"

    # -- processes: no sanitizer report, nothing died that the injector did not kill
    local san
    san=$(grep -l -E 'ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' "$T"/logs/*.log 2>/dev/null | xargs -r -n1 basename | paste -sd, || true)
    inv no_sanitizer_report "$([ -z "$san" ] && echo true || echo false)" "$(jq -nc --arg f "$san" '{logs: $f}')"
    inv no_unexpected_exit "$(grep -q ' crash ' "$EV" && echo false || echo true)" \
        "$(jq -nc --arg c "$(grep ' crash ' "$EV" | cut -d' ' -f3- | sort | uniq -c | paste -sd';')" '{crashes: $c}')"
}

report() {
    local load; load=$(cut -d' ' -f1-3 /proc/loadavg)
    jq -n --argjson seed "$SOAK_SEED" --arg catalog "$SOAK_CATALOG" --argjson seconds "$SOAK_SECONDS" \
        --arg disk "$DISKFULL" --arg load "$load" --argjson ncpu "$(nproc)" \
        --argjson setup_s "$((LOAD_T0 - STARTED))" --argjson soak_s "$((FAULTS_DONE - LOAD_T0))" --argjson settle_s "$((SETTLED - FAULTS_DONE))" \
        --argjson total_s "$(( $(date +%s) - STARTED ))" \
        --arg cmd "SOAK_SECONDS=$SOAK_SECONDS SOAK_SEED=$SOAK_SEED SOAK_CATALOG=$SOAK_CATALOG make soak" \
        --rawfile ev "$EV" --slurpfile w "$T/writer.json" --slurpfile r "$T/reader.json" \
        --argjson inv "$(for f in "$T"/inv/*.json; do jq -c --arg k "$(basename "$f" .json)" '{($k): .}' "$f"; done | jq -s 'add')" '
        def lines: $ev | split("\n") | map(select(length > 0) | split(" "));
        {seed: $seed, catalog: $catalog, object_store: "s3 (s3rver + policy proxy + chaos proxy)",
         seconds: $seconds, command: $cmd, disk_full: $disk,
         faults: (lines | map(select(.[1] == "fault") | .[2]) | group_by(.) | map({(.[0]): length}) | add // {}),
         faults_skipped: (lines | map(select(.[1] == "skipped")) | length),
         operations: (lines | map(select(.[1] == "op")) | group_by(.[2]) | map({(.[0][2]): {
             ok: map(select(.[3] == "rc=0")) | length,
             failed: map(select(.[3] != "rc=0" and .[3] != "rc=137")) | length,
             killed: map(select(.[3] == "rc=137")) | length}}) | add // {}),
         settle: (lines | map(select(.[1] == "settle") | .[2:] | join(" "))),
         problems: (lines | map(select(.[1] == "problem" or .[1] == "crash") | .[1:] | join(" "))),
         clickhouse_delete_attempts_after_fault: (lines | map(select(.[1] == "s3del") | .[2:] | join(" "))),
         writer: ($w[0] | {batches, rows, retried, failed_attempts, gave_up, statuses}),
         reader: ($r[0] | {ok, error, wrong, fanout, one_tenant}),
         invariants: $inv, invariants_checked: ($inv | length),
         invariants_ok: ([$inv[] | select(.ok)] | length),
         seconds_setup: $setup_s, seconds_soak: $soak_s, seconds_settle: $settle_s, seconds_total: $total_s,
         load_average_end: $load, cpus: $ncpu}' >"$SOAK_REPORT"
    cat "$SOAK_REPORT"
}

-- The read-routing differential corpus (tests/integration/router_read.sh): one query per line,
-- run through `ferry router` over a 3-node lab and on a single reference node; results must be
-- identical (compared as sorted lines; JSON as meta + sorted data). Lines starting with -- are
-- comments. Tables: events (tenant, day, split, uid, u, x, ts, k, arr), dim (k, name).
SELECT count() FROM events
SELECT count() FROM events WHERE tenant = 'acme'
SELECT count(), sum(x), min(x), max(x) FROM events WHERE tenant IN ('acme', 'beta')
SELECT tenant, count() AS c, sum(x) AS s FROM events GROUP BY tenant ORDER BY tenant
SELECT u, avg(x) AS a FROM events WHERE tenant = 'gamma' GROUP BY u ORDER BY u
SELECT u, uniqExact(k) AS uk, uniqExact(x) AS ux FROM events GROUP BY u ORDER BY u
SELECT tenant, split, count() FROM events GROUP BY tenant, split ORDER BY tenant, split
SELECT toDate(ts) AS d, count() AS c FROM events GROUP BY d ORDER BY d
SELECT u, sumIf(x, k > 2) AS s FROM events GROUP BY u HAVING s > 100 ORDER BY s DESC
SELECT u, count() FROM events GROUP BY u HAVING count() > 40 ORDER BY u
SELECT argMax(x, ts), argMin(uid, x) FROM events WHERE tenant = 'beta'
SELECT quantileExact(0.5)(x), median(x) FROM events WHERE tenant = 'acme'
SELECT quantileExact(0.9)(x) AS q FROM events WHERE tenant IN ('acme', 'zeta', 'delta')
SELECT k, max(ts) AS m FROM events GROUP BY k ORDER BY m DESC LIMIT 3
SELECT k, count() AS c FROM events GROUP BY k ORDER BY c DESC, k LIMIT 2 OFFSET 1
SELECT countIf(k = 1) * 100 / count() AS pct FROM events
SELECT u, sum(x) / count() AS mean FROM events GROUP BY u ORDER BY u
SELECT round(varPop(x), 3), round(stddevSamp(x), 3) FROM events WHERE tenant = 'gamma'
SELECT groupArray(x) AS g FROM (SELECT x FROM events WHERE tenant = 'acme' ORDER BY x LIMIT 5)
SELECT arraySort(groupUniqArray(k)) FROM events WHERE tenant = 'beta'
SELECT count(DISTINCT u) FROM events
SELECT uniqExact(uid) FROM events WHERE tenant IN ('zeta', 'acme')
SELECT u, count() FROM events GROUP BY u WITH TOTALS ORDER BY u
SELECT toStartOfHour(ts) AS h, count() FROM events WHERE tenant = 'acme' GROUP BY h ORDER BY h LIMIT 5
SELECT count() FROM events WHERE tenant = 'nobody'
SELECT sum(x) FROM events WHERE tenant = 'zeta' AND split = 2
SELECT tenant, max(x) - min(x) AS spread FROM events WHERE tenant IN ('delta', 'zeta') GROUP BY tenant ORDER BY tenant
SELECT x, u FROM events WHERE tenant = 'acme' ORDER BY x LIMIT 10
SELECT * FROM events WHERE tenant = 'beta' ORDER BY x DESC LIMIT 7
SELECT x FROM events ORDER BY x LIMIT 5, 5
SELECT x FROM events ORDER BY x LIMIT 5 OFFSET 3
SELECT x, ts FROM events WHERE tenant IN ('acme', 'gamma') AND k = 3 ORDER BY ts, x LIMIT 40
SELECT x FROM events WHERE (tenant = 'acme' OR k = 4) AND x % 7 = 0 ORDER BY x
SELECT x + 1 AS y FROM events WHERE (tenant = 'beta' AND x % 5 = 0) ORDER BY y
SELECT x FROM events WHERE x IN (SELECT x FROM events WHERE k = 0) AND tenant = 'acme' ORDER BY x
SELECT x, a FROM events ARRAY JOIN arr AS a WHERE tenant = 'gamma' ORDER BY x, a LIMIT 12
SELECT DISTINCT u FROM events ORDER BY u
SELECT DISTINCT tenant, k FROM events WHERE tenant IN ('acme', 'zeta') ORDER BY tenant, k
SELECT u, x FROM events ORDER BY x LIMIT 1 BY u
SELECT x FROM events PREWHERE tenant = 'beta' WHERE k = 1 ORDER BY x
SELECT 'FROM events WHERE tenant = ''x''' AS s, x FROM events /* events */ WHERE tenant = 'acme' ORDER BY x LIMIT 3
SELECT `x` FROM `events` WHERE `tenant` = 'gamma' ORDER BY 1
SELECT x FROM events e WHERE e.tenant = 'acme' ORDER BY e.x LIMIT 4
SELECT events.x FROM events WHERE events.k = 2 ORDER BY events.x LIMIT 6
SELECT d.name, count() AS c FROM events AS e JOIN dim AS d ON e.k = d.k GROUP BY d.name ORDER BY d.name
SELECT d.name, sum(e.x) FROM dim AS d LEFT JOIN events AS e ON e.k = d.k AND e.tenant = 'acme' GROUP BY d.name ORDER BY d.name
SELECT e.x, d.name FROM events AS e INNER JOIN dim AS d USING (k) WHERE e.tenant = 'beta' ORDER BY e.x LIMIT 5
SELECT count() FROM events AS a JOIN events AS b ON a.x = b.x + 3 WHERE a.tenant = 'acme'
SELECT x, sum(x) OVER (PARTITION BY u ORDER BY x) AS running FROM events WHERE tenant = 'acme' ORDER BY x LIMIT 10
SELECT x, row_number() OVER (ORDER BY x) AS r FROM events WHERE tenant = 'gamma' ORDER BY r LIMIT 5
SELECT tenant, x, rank() OVER (PARTITION BY tenant ORDER BY x DESC) AS r FROM events QUALIFY r <= 2 ORDER BY tenant, r
SELECT t, c FROM (SELECT tenant AS t, count() AS c FROM events GROUP BY tenant) ORDER BY t
SELECT max(c) FROM (SELECT u, count() AS c FROM events WHERE tenant = 'beta' GROUP BY u)
SELECT x FROM events WHERE tenant = 'acme' AND x < 200 UNION ALL SELECT x FROM events WHERE tenant = 'beta' AND x < 200 ORDER BY x
WITH 3 AS lim SELECT x FROM events WHERE k = lim ORDER BY x LIMIT 5
WITH sub AS (SELECT u, x FROM events WHERE tenant = 'gamma') SELECT u, max(x) FROM sub GROUP BY u ORDER BY u
SELECT count() FROM events WHERE u GLOBAL IN (SELECT u FROM events WHERE tenant = 'gamma' AND x < 300)
SELECT x FROM events WHERE k GLOBAL IN (SELECT k FROM dim WHERE name = 'k2') AND tenant = 'beta' ORDER BY x
SELECT count(), sum(x) FROM events WHERE uid GLOBAL IN (SELECT uid FROM events WHERE tenant = 'zeta' AND k = 1)
SELECT e.x, r.m FROM events AS e GLOBAL JOIN (SELECT k, max(x) AS m FROM events WHERE tenant = 'acme' GROUP BY k) AS r ON e.k = r.k WHERE e.tenant = 'beta' ORDER BY e.x LIMIT 5
SELECT (SELECT count() FROM dim) AS n, count() FROM events
SELECT tenant, count() FROM events GROUP BY tenant ORDER BY tenant FORMAT JSONEachRow
SELECT x FROM events WHERE tenant = 'acme' ORDER BY x LIMIT 3 FORMAT CSV SETTINGS max_threads = 1
SELECT u, sum(x) FROM events GROUP BY u ORDER BY u SETTINGS max_threads = 2 FORMAT TSVWithNames
SELECT tenant, uniqExact(uid) AS users, sum(x) AS s FROM events GROUP BY tenant ORDER BY tenant FORMAT JSON
SELECT x, u FROM events WHERE tenant = 'delta' ORDER BY x LIMIT 4 FORMAT TSV
SELECT k, count() AS c FROM events WHERE tenant IN ('acme', 'beta', 'zeta') GROUP BY k ORDER BY k FORMAT CSVWithNames
SELECT x FROM events WHERE tenant = 'zeta' ORDER BY x DESC LIMIT 3 FORMAT JSON

// A real client against `ferry router`: the official ClickHouse JS client (@clickhouse/client,
// cached by scripts/setup.sh) logs in with a username and password, writes and reads as a user
// bound to one tenant, and gets ClickHouse's error codes for what the router refuses.
// Usage: node js_client_check.cjs CLIENT_DIR ROUTER_URL USER PASSWORD TENANT FOREIGN_TENANT
// Prints one "ok - ..." line per check; exits 1 at the first failure.
'use strict';
const path = require('path');
const [clientDir, url, user, password, tenant, foreign] = process.argv.slice(2);
const { createClient } = require(path.join(clientDir, 'node_modules', '@clickhouse', 'client'));

function fail(msg) {
  console.error('FAIL [js_client]: ' + msg);
  process.exit(1);
}
function ok(msg) {
  console.log('ok - js client: ' + msg);
}

// The error the client raises for what the router refused: ClickHouse's code and name.
async function expectError(what, fn, code, type) {
  try {
    await fn();
  } catch (e) {
    if (String(e.code) !== code || e.type !== type)
      fail(`${what}: expected ${code} ${type}, got code=${e.code} type=${e.type}: ${e.message}`);
    ok(`${what}: error ${e.code} ${e.type}`);
    return;
  }
  fail(`${what}: no error`);
}

async function count(client, t) {
  const rs = await client.query({
    query: 'SELECT count() AS c FROM events WHERE tenant = {t:String} AND u = {u:String}',
    query_params: { t, u: 'js' },
    format: 'JSONEachRow',
  });
  const rows = await rs.json();
  return Number(rows[0].c);
}

(async () => {
  const client = createClient({ url, username: user, password, request_timeout: 60000 });
  const ping = await client.ping();
  if (!ping.success) fail('ping: ' + (ping.error && ping.error.message));
  ok('ping');
  const before = await count(client, tenant);
  const rows = [];
  for (let i = 0; i < 20; i++)
    rows.push({ tenant, day: 20261215, uid: 7000 + i, u: 'js', x: 700000 + i,
                ts: '2026-12-15 00:00:00', k: i % 5, arr: [i % 2] });
  await client.insert({ table: 'events', values: rows, format: 'JSONEachRow',
                        columns: ['tenant', 'day', 'uid', 'u', 'x', 'ts', 'k', 'arr'] });
  const after = await count(client, tenant);
  if (after !== before + 20) fail(`insert: count ${before} -> ${after}, expected +20`);
  ok(`inserted 20 rows of ${tenant} (JSONEachRow) and read them back`);
  const rs = await client.query({
    query: 'SELECT tenant, sum(x) AS s FROM events WHERE u = {u:String} GROUP BY tenant',
    query_params: { u: 'js' }, format: 'JSONEachRow' });
  const got = await rs.json();
  if (got.length !== 1 || got[0].tenant !== tenant)
    fail('a read without a tenant filter saw ' + JSON.stringify(got));
  ok('a read without a tenant filter sees only ' + tenant);
  await expectError('a query naming ' + foreign,
                    () => client.query({ query: `SELECT count() FROM events WHERE tenant = '${foreign}'`,
                                         format: 'JSONEachRow' }).then((r) => r.json()),
                    '497', 'ACCESS_DENIED');
  await expectError('a query parameter naming ' + foreign,
                    () => count(client, foreign), '497', 'ACCESS_DENIED');
  await expectError('an insert with a row of ' + foreign,
                    () => client.insert({ table: 'events', format: 'JSONEachRow',
                                          values: [{ tenant, day: 20261215, uid: 1, u: 'js', x: 1 },
                                                   { tenant: foreign, day: 20261215, uid: 2, u: 'js', x: 2 }] }),
                    '497', 'ACCESS_DENIED');
  if ((await count(client, tenant)) !== after) fail('the refused insert stored rows');
  ok('the refused insert stored nothing');
  await expectError('a table function',
                    () => client.query({ query: "SELECT * FROM file('/etc/passwd', 'LineAsString')",
                                         format: 'JSONEachRow' }).then((r) => r.json()),
                    '497', 'ACCESS_DENIED');
  await expectError('a DDL statement',
                    () => client.command({ query: 'DROP TABLE events' }), '497', 'ACCESS_DENIED');
  await client.close();
  const wrong = createClient({ url, username: user, password: password + 'x' });
  await expectError('a wrong password',
                    () => wrong.query({ query: 'SELECT 1', format: 'JSONEachRow' }).then((r) => r.json()),
                    '516', 'AUTHENTICATION_FAILED');
  await wrong.close();
})().catch((e) => fail('unexpected: ' + (e && e.stack ? e.stack : e)));

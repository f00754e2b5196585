// End-to-end check of provider.mjs, playing the browser and the relying party
// with plain fetch (manual redirects + a path-aware cookie jar).
//
//   node drive.mjs            # spawns provider.mjs on a free loopback port
//   node drive.mjs --quiet    # only the summary and the decoded ID token
//
// Prints every hop (method, path, status, Location, cookies sent) and the
// decoded ID token; exits non-zero on the first failed expectation.

import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const quiet = process.argv.includes('--quiet');
const log = (...a) => { if (!quiet) console.log(...a); };

const RP = 'http://127.0.0.1:3000';
const REDIRECT_URI = `${RP}/auth/oidc/callback`;
const POST_LOGOUT = `${RP}/login`;
const SCOPE = 'openid profile email groups';

// ---------------------------------------------------------------- config
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-oidc-'));
const configPath = path.join(dir, 'config.json');
const config = {
  port: 0, // provider picks a free port and derives the issuer from it
  clients: [
    {
      client_id: 'gantry',
      client_secret: 'gantry-test-secret-0123456789',
      redirect_uris: [REDIRECT_URI],
      post_logout_redirect_uris: [POST_LOGOUT],
    },
  ],
  users: [
    { sub: 'u-alice', username: 'alice', password: 'alice-pw', groups: ['gpu-ops'], email: 'alice@example.org' },
    { sub: 'u-bob', username: 'bob', password: 'bob-pw', groups: ['viewers'], email: 'bob@example.org' },
  ],
  id_token_ttl: 300,
};
const writeConfig = () => {
  // atomic replace, as a test should do
  fs.writeFileSync(`${configPath}.tmp`, JSON.stringify(config, null, 2));
  fs.renameSync(`${configPath}.tmp`, configPath);
};
writeConfig();

// ---------------------------------------------------------------- provider
const child = spawn(process.execPath, [path.join(here, 'provider.mjs'), configPath], {
  stdio: ['ignore', 'pipe', 'pipe'],
});
let stderr = '';
child.stderr.on('data', (d) => { stderr += d; });
const issuer = await new Promise((resolve, reject) => {
  let out = '';
  const timer = setTimeout(() => reject(new Error(`provider did not start:\n${stderr}`)), 15000);
  child.stdout.on('data', (d) => {
    out += d;
    const m = /^listening (\S+)\n/m.exec(out);
    if (m) { clearTimeout(timer); resolve(m[1]); }
  });
  child.on('exit', (code) => reject(new Error(`provider exited ${code}:\n${stderr}`)));
});
log(`provider: ${issuer}`);

let failures = 0;
function check(cond, what, extra) {
  if (!cond) {
    failures += 1;
    console.error(`FAIL: ${what}`, extra ?? '');
    throw new Error(`FAIL: ${what}`);
  }
  log(`  ok: ${what}`);
}

// ---------------------------------------------------------------- cookie jar
class Jar {
  constructor() { this.cookies = new Map(); } // key name|path -> {name, value, path}

  store(url, res) {
    for (const sc of res.headers.getSetCookie()) {
      const [pair, ...attrs] = sc.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      let cpath = '/';
      let expired = false;
      for (const a of attrs) {
        const [k, v] = a.split('=');
        if (k.toLowerCase() === 'path') cpath = v;
        if (k.toLowerCase() === 'expires' && Date.parse(v) < Date.now()) expired = true;
        if (k.toLowerCase() === 'max-age' && Number(v) <= 0) expired = true;
      }
      const key = `${name}|${cpath}`;
      if (expired || value === '') this.cookies.delete(key);
      else this.cookies.set(key, { name, value, path: cpath });
    }
  }

  header(url) {
    const p = new URL(url).pathname;
    const matching = [...this.cookies.values()].filter(
      (c) => p === c.path || p.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`),
    );
    return matching.map((c) => `${c.name}=${c.value}`).join('; ');
  }
}

const short = (u) => {
  if (!u) return u;
  const url = new URL(u, issuer);
  const q = url.search.replace(/(code|id_token_hint|code_challenge|xsrf)=[^&]+/g, '$1=…');
  return `${url.origin === issuer ? '' : url.origin}${url.pathname}${q}`;
};

async function req(jar, method, url, { form, headers = {} } = {}) {
  const full = new URL(url, issuer).href;
  const cookie = jar.header(full);
  const h = { ...headers };
  if (cookie) h.cookie = cookie;
  let body;
  if (form) {
    body = new URLSearchParams(form).toString();
    h['content-type'] = 'application/x-www-form-urlencoded';
  }
  const res = await fetch(full, { method, headers: h, body, redirect: 'manual' });
  jar.store(full, res);
  const text = await res.text();
  const location = res.headers.get('location');
  const cookieNames = cookie ? cookie.split('; ').map((c) => c.split('=')[0]).join(',') : '-';
  const set = res.headers.getSetCookie().map((c) => {
    const [pair, ...attrs] = c.split(';').map((s) => s.trim());
    const p = attrs.find((a) => a.toLowerCase().startsWith('path=')) ?? '';
    const cleared = pair.endsWith('=') ? ' (cleared)' : '';
    return `${pair.split('=')[0]}[${short(p.slice(5))}]${cleared}`;
  }).join(' ');
  log(`  ${method} ${short(full)}  [cookies sent: ${cookieNames}]\n    -> ${res.status}${location ? ` Location: ${short(location)}` : ''}${set ? `  Set-Cookie: ${set}` : ''}`);
  return { status: res.status, location, text, headers: res.headers };
}

// ---------------------------------------------------------------- helpers
const b64u = (buf) => Buffer.from(buf).toString('base64url');
const decodeJwt = (jwt) => {
  const [h, p] = jwt.split('.');
  return { header: JSON.parse(Buffer.from(h, 'base64url')), payload: JSON.parse(Buffer.from(p, 'base64url')) };
};

const discovery = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
const jwks = await (await fetch(discovery.jwks_uri)).json();

function verifyJwt(jwt) {
  const [h, p, s] = jwt.split('.');
  const { kid, alg } = JSON.parse(Buffer.from(h, 'base64url'));
  const jwk = jwks.keys.find((k) => k.kid === kid);
  check(alg === 'RS256' && jwk, `ID token header alg=RS256, kid ${kid} found in JWKS`);
  const key = crypto.createPublicKey({ key: jwk, format: 'jwk' });
  const ok = crypto.verify('sha256', Buffer.from(`${h}.${p}`), key, Buffer.from(s, 'base64url'));
  check(ok, 'ID token RS256 signature verifies with the JWKS key');
}

function authorizeUrl(clientId, { pkce = true, extra = {} } = {}) {
  const state = b64u(crypto.randomBytes(12));
  const nonce = b64u(crypto.randomBytes(12));
  const verifier = b64u(crypto.randomBytes(32));
  const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
  const u = new URL(discovery.authorization_endpoint);
  u.search = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT_URI,
    scope: SCOPE,
    state,
    nonce,
    ...(pkce ? { code_challenge: challenge, code_challenge_method: 'S256' } : {}),
    ...extra,
  }).toString();
  return { url: u.href, state, nonce, verifier };
}

// Follows the browser side until the redirect leaves the provider.
// Returns { callback: URL at the RP } or { page } when a login form is shown.
async function browse(jar, start, login) {
  let r = await req(jar, 'GET', start);
  let gets = 1;
  for (let hops = 0; hops < 10; hops += 1) {
    if (r.status === 200 && /name="password"/.test(r.text)) {
      if (!login) return { page: r };
      const action = /<form method="post" action="([^"]+)"/.exec(r.text)[1];
      const lr = await req(jar, 'POST', action, { form: login });
      if (lr.status === 200) return { page: lr };
      r = lr;
      login = undefined;
      continue;
    }
    if (r.status !== 302 && r.status !== 303) return { page: r };
    const next = new URL(r.location, issuer);
    if (next.origin !== new URL(issuer).origin) return { callback: next, hops: gets };
    r = await req(jar, 'GET', next.href);
    gets += 1;
  }
  throw new Error('too many redirects');
}

async function tokenRequest(client, params, { auth = 'basic' } = {}) {
  const headers = { 'content-type': 'application/x-www-form-urlencoded' };
  const form = { grant_type: 'authorization_code', ...params };
  if (auth === 'basic') {
    const enc = (s) => encodeURIComponent(s); // RFC 6749 2.3.1: form-encode id and secret
    headers.authorization = `Basic ${Buffer.from(`${enc(client.client_id)}:${enc(client.client_secret)}`).toString('base64')}`;
  } else {
    form.client_id = client.client_id;
    form.client_secret = client.client_secret;
  }
  const res = await fetch(discovery.token_endpoint, { method: 'POST', headers, body: new URLSearchParams(form) });
  const body = await res.json();
  log(`  POST ${short(discovery.token_endpoint)} (${auth}) -> ${res.status} ${JSON.stringify(Object.keys(body))}${body.error ? ` ${body.error}: ${body.error_description}` : ''}`);
  return { status: res.status, body };
}

async function signIn(jar, client, login, opts = {}) {
  const a = authorizeUrl(client.client_id);
  const { callback, page, hops } = await browse(jar, a.url, login);
  check(callback, `sign-in as ${login?.username ?? '(session)'} reaches redirect_uri`, page?.text?.slice(0, 300));
  check(callback.origin + callback.pathname === REDIRECT_URI, 'callback is the registered redirect_uri');
  check(callback.searchParams.get('state') === a.state, 'callback carries our state');
  check(callback.searchParams.get('iss') === issuer, 'callback carries iss = issuer (RFC 9207)');
  const code = callback.searchParams.get('code');
  check(code, 'callback carries code');
  const tok = await tokenRequest(client, { code, redirect_uri: REDIRECT_URI, code_verifier: a.verifier }, opts);
  check(tok.status === 200, 'token endpoint 200', tok.body);
  check(tok.body.token_type === 'Bearer' && tok.body.access_token && tok.body.id_token, 'token response has access_token, id_token, token_type=Bearer');
  verifyJwt(tok.body.id_token);
  const { header, payload } = decodeJwt(tok.body.id_token);
  check(payload.iss === issuer && payload.aud === client.client_id, 'iss and aud');
  check(payload.nonce === a.nonce, 'nonce echoed');
  return { header, payload, tok: tok.body, code, a, hops };
}

const gantry = config.clients[0];
const alice = { username: 'alice', password: 'alice-pw' };
let example;

try {
  console.log('== discovery');
  for (const k of ['issuer', 'authorization_endpoint', 'token_endpoint', 'jwks_uri', 'end_session_endpoint',
    'id_token_signing_alg_values_supported', 'code_challenge_methods_supported',
    'token_endpoint_auth_methods_supported', 'scopes_supported', 'authorization_response_iss_parameter_supported']) {
    console.log(`  ${k}: ${JSON.stringify(discovery[k])}`);
  }
  check(discovery.issuer === issuer, 'discovery issuer');

  console.log('== (a) sign-in as alice (fresh cookie jar)');
  const jarA = new Jar();
  const s1 = await signIn(jarA, gantry, alice);
  check(JSON.stringify(s1.payload.groups) === '["gpu-ops"]', 'groups claim in ID token', s1.payload);
  check(s1.payload.preferred_username === 'alice', 'preferred_username in ID token');
  check(s1.payload.email === 'alice@example.org', 'email in ID token');
  check(s1.payload.exp - s1.payload.iat === config.id_token_ttl, 'exp - iat = id_token_ttl');
  example = s1;

  console.log('== userinfo');
  const ui = await (await fetch(discovery.userinfo_endpoint, { headers: { authorization: `Bearer ${s1.tok.access_token}` } })).json();
  log(`  userinfo: ${JSON.stringify(ui)}`);
  check(JSON.stringify(ui.groups) === '["gpu-ops"]', 'groups in userinfo too');

  console.log('== groups changed in CONFIG.json; same jar -> SSO straight to redirect_uri (no login form, no interaction)');
  config.users[0].groups = ['gpu-ops', 'admins'];
  writeConfig();
  const s2 = await signIn(jarA, gantry, undefined);
  check(s2.hops === 1, 'SSO: a single hop GET /auth -> 303 redirect_uri', s2.hops);
  check(JSON.stringify(s2.payload.groups) === '["gpu-ops","admins"]', 'new groups in next ID token');

  console.log('== code replay');
  const replay = await tokenRequest(gantry, { code: s1.code, redirect_uri: REDIRECT_URI, code_verifier: s1.a.verifier });
  check(replay.status === 400 && replay.body.error === 'invalid_grant', 'reused code -> 400 invalid_grant');
  const revoked = await fetch(discovery.userinfo_endpoint, { headers: { authorization: `Bearer ${s1.tok.access_token}` } });
  check(revoked.status === 401, 'code reuse also revoked the access token issued for it (userinfo 401)');

  console.log('== SSO after the grant was revoked: consent interaction, auto-granted (GET /interaction/<uid> -> 303)');
  const s3 = await signIn(jarA, gantry, undefined);
  check(s3.hops === 3, 'SSO with missing consent: /auth -> /interaction/<uid> -> /auth/<uid> -> redirect_uri', s3.hops);
  check(JSON.stringify(s3.payload.groups) === '["gpu-ops","admins"]', 'groups still current');

  console.log('== (b) RP-initiated logout');
  const end = new URL(discovery.end_session_endpoint);
  end.search = new URLSearchParams({
    id_token_hint: s2.tok.id_token, post_logout_redirect_uri: POST_LOGOUT, state: 'logout-state-1',
  }).toString();
  const l1 = await req(jarA, 'GET', end.href);
  check(l1.status === 200, 'end_session GET -> 200 HTML form');
  const action = /<form[^>]*method="post" action="([^"]+)"/.exec(l1.text)[1];
  const inputs = Object.fromEntries([...l1.text.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"\/>/g)].map((m) => [m[1], m[2]]));
  check(inputs.xsrf && inputs.logout === 'yes', 'form has hidden xsrf and logout=yes', inputs);
  const l2 = await req(jarA, 'POST', action, { form: inputs });
  check(l2.status === 303 && l2.location === `${POST_LOGOUT}?state=logout-state-1`, 'confirm -> 303 post_logout_redirect_uri?state=…', l2.location);
  const after = await browse(jarA, authorizeUrl('gantry').url, undefined);
  check(after.page && /name="password"/.test(after.page.text), 'after logout the same jar gets the login form again');

  console.log('== (c1) wrong password');
  const jarW = new Jar();
  const w = await browse(jarW, authorizeUrl('gantry').url, { username: 'alice', password: 'wrong' });
  check(w.page?.status === 200 && w.page.text.includes('Invalid username or password'), 'wrong password -> 200 page with error text');

  console.log('== (c2) PKCE missing');
  const jarP = new Jar();
  const np = authorizeUrl('gantry', { pkce: false });
  const p1 = await req(jarP, 'GET', np.url);
  const pl = new URL(p1.location);
  check(p1.status === 303 && pl.origin + pl.pathname === REDIRECT_URI && pl.searchParams.get('error') === 'invalid_request',
    'no code_challenge -> 303 redirect_uri?error=invalid_request', p1.location);
  log(`    error_description: ${pl.searchParams.get('error_description')}`);

  console.log('== (c3) wrong code_verifier');
  const jarV = new Jar();
  const av = authorizeUrl('gantry');
  const bv = await browse(jarV, av.url, alice);
  const wv = await tokenRequest(gantry, { code: bv.callback.searchParams.get('code'), redirect_uri: REDIRECT_URI, code_verifier: b64u(crypto.randomBytes(32)) });
  check(wv.status === 400 && wv.body.error === 'invalid_grant', 'wrong code_verifier -> 400 invalid_grant', wv.body);

  console.log('== (c4) removed user');
  const jarB = new Jar();
  const bob = { username: 'bob', password: 'bob-pw' };
  const ab = authorizeUrl('gantry');
  const bb = await browse(jarB, ab.url, bob); // code issued while bob exists
  check(bb.callback, 'bob signs in');
  config.users = config.users.filter((u) => u.username !== 'bob');
  writeConfig();
  const rb = await tokenRequest(gantry, { code: bb.callback.searchParams.get('code'), redirect_uri: REDIRECT_URI, code_verifier: ab.verifier });
  check(rb.status === 400 && rb.body.error === 'invalid_grant', 'code of a removed user -> 400 invalid_grant', rb.body);
  const fb = await browse(new Jar(), authorizeUrl('gantry').url, bob);
  check(fb.page?.status === 200 && fb.page.text.includes('Invalid username or password'), 'removed user login -> Invalid username or password');
  const sb = await browse(jarB, authorizeUrl('gantry').url, undefined);
  check(sb.page && /name="password"/.test(sb.page.text), 'removed user with a live OP session -> login form again (no SSO)');

  console.log('== client_secret_post (also accepted for a client registered with client_secret_basic)');
  await signIn(new Jar(), gantry, alice, { auth: 'post' });
  console.log('== wrong client secret');
  const badClient = { ...gantry, client_secret: 'not-the-secret' };
  const wrongAuth = await tokenRequest(badClient, { code: 'x', redirect_uri: REDIRECT_URI, code_verifier: 'y'.repeat(43) });
  check(wrongAuth.status === 401 && wrongAuth.body.error === 'invalid_client', 'wrong client secret -> 401 invalid_client', wrongAuth.body);

  console.log('== example ID token (first sign-in)');
  console.log(JSON.stringify({ header: example.header, payload: example.payload }, null, 2));
} catch (err) {
  if (!failures) console.error(err);
  failures = Math.max(failures, 1);
} finally {
  child.kill('SIGTERM');
  const code = await new Promise((r) => child.on('exit', (c, s) => r(c ?? s)));
  if (code !== 0) failures += 1;
  if (code !== 0 || failures) console.error(`provider exit: ${code}; provider stderr:\n${stderr}`);
  fs.rmSync(dir, { recursive: true, force: true });
}
console.log(failures ? `drive: FAILED (${failures})` : 'drive: OK');
process.exit(failures ? 1 : 0);

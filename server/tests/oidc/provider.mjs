// Test OpenID Provider for Gantry's OIDC integration tests.
//
//   node provider.mjs CONFIG.json
//
// Runs panva's `oidc-provider` (OpenID Certified) over plain HTTP on
// 127.0.0.1:<port>, with its own minimal login page (no devInteractions, which
// would accept any password). Users are re-read from CONFIG.json on every
// login and every token/ID-token issue, so a test can remove a user or change
// their groups while the provider runs. Prints exactly one line
// `listening <issuer>` to stdout when ready; everything else goes to stderr.
// Exits 0 on SIGTERM/SIGINT. See README.md for the HTTP transcript.

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';

// stdout carries exactly one line (`listening <issuer>`); oidc-provider prints
// its NOTICEs with console.info, so send all console output to stderr.
console.log = console.info = console.debug = (...args) => console.error(...args);

// Signal handling first, so a SIGTERM that arrives while oidc-provider is
// still loading or the key is being generated also exits 0.
let server;
function shutdown() {
  if (!server?.listening) process.exit(0);
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

const { default: Provider, interactionPolicy } = await import('oidc-provider');

if (typeof URL.parse !== 'function' || typeof crypto.hash !== 'function') {
  console.error(`oidc-provider 9 needs Node.js >= 20.18 (URL.parse, crypto.hash); this is ${process.version}`);
  process.exit(2);
}

const configPath = process.argv[2];
if (!configPath) {
  console.error('usage: node provider.mjs CONFIG.json');
  process.exit(2);
}

const readConfig = () => JSON.parse(fs.readFileSync(configPath, 'utf8'));
const config = readConfig();

// Users are looked up fresh from CONFIG.json each time (removal / group changes
// take effect on the next login, token request or ID token issue).
const readUsers = () => {
  try {
    return readConfig().users ?? [];
  } catch (err) {
    // A test rewriting the file non-atomically may be caught mid-write: retry once.
    console.error('provider: re-reading config failed, retrying:', err.message);
    return readConfig().users ?? [];
  }
};
const userBySub = (sub) => readUsers().find((u) => u.sub === sub);

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({
  '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
}[c]));

function safeEqual(a, b) {
  const ha = crypto.createHash('sha256').update(String(a)).digest();
  const hb = crypto.createHash('sha256').update(String(b)).digest();
  return crypto.timingSafeEqual(ha, hb);
}

// RS256 signing key generated at start; published at jwks_uri (/jwks).
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingJwk = {
  ...privateKey.export({ format: 'jwk' }),
  kid: `k-${crypto.randomBytes(6).toString('hex')}`,
  alg: 'RS256',
  use: 'sig',
};

const idTokenTtl = Number(config.id_token_ttl ?? 300);

function loginPage(uid, { error, username } = {}) {
  return `<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>Sign in</title></head>
<body>
  <h1>Sign in</h1>
  ${error ? `<p class="error" id="error">${esc(error)}</p>` : ''}
  <form method="post" action="/interaction/${esc(uid)}/login">
    <input type="text" name="username" value="${esc(username ?? '')}" autofocus>
    <input type="password" name="password">
    <button type="submit">Sign in</button>
  </form>
</body>
</html>`;
}

// RP-initiated logout confirmation page. Same shape as oidc-provider's own
// form_post page (used when there is no signed-in session): one form, POST to
// /session/end/confirm, hidden inputs `xsrf` and `logout=yes`, auto-submitted
// by script in a browser. A non-browser client POSTs those hidden inputs.
async function logoutSource(ctx, form) {
  const action = /action="([^"]+)"/.exec(form)[1];
  const xsrf = /name="xsrf" value="([^"]+)"/.exec(form)[1];
  ctx.type = 'html';
  ctx.body = `<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>Sign out</title></head>
<body>
  <form id="op.logoutForm" method="post" action="${esc(action)}">
    <input type="hidden" name="xsrf" value="${esc(xsrf)}"/>
    <input type="hidden" name="logout" value="yes"/>
    <button type="submit">Sign out</button>
  </form>
  <script>document.forms[0].submit()</script>
</body>
</html>`;
}

async function postLogoutSuccessSource(ctx) {
  ctx.type = 'html';
  ctx.body = '<!DOCTYPE html><html><body><h1>Signed out</h1></body></html>';
}

async function renderError(ctx, out) {
  ctx.type = 'html';
  ctx.body = `<!DOCTYPE html><html><body><h1>Error</h1>${
    Object.entries(out).map(([k, v]) => `<pre><strong>${esc(k)}</strong>: ${esc(v)}</pre>`).join('')
  }</body></html>`;
}

// Default login/consent policy, plus: a session whose user was removed from
// CONFIG.json must log in again (oidc-provider would otherwise crash on the
// missing account).
function interactionPolicyWithRemovedUsers() {
  const policy = interactionPolicy.base();
  policy.get('login').checks.push(new interactionPolicy.Check(
    'account_removed',
    'End-User account no longer exists',
    'login_required',
    (ctx) => Boolean(ctx.oidc.session.accountId && !ctx.oidc.account),
  ));
  return policy;
}

function buildProvider(issuer) {
  const clients = (config.clients ?? []).map((c) => ({
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: 'RS256',
    ...c,
  }));

  const provider = new Provider(issuer, {
    clients,
    jwks: { keys: [signingJwk] },
    scopes: ['openid', 'profile', 'email', 'groups'],
    claims: {
      openid: ['sub'],
      profile: ['preferred_username', 'name'],
      email: ['email', 'email_verified'],
      groups: ['groups'],
    },
    // Put scope-requested claims (groups, preferred_username, email) into the
    // ID token too, not only into userinfo.
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    responseTypes: ['code'],
    clientAuthMethods: ['client_secret_basic', 'client_secret_post'],
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: { enabled: true, logoutSource, postLogoutSuccessSource },
      // Plain code flow only; keep the surface small.
      pushedAuthorizationRequests: { enabled: false },
      dPoP: { enabled: false },
    },
    interactions: {
      policy: interactionPolicyWithRemovedUsers(),
      url: (ctx, interaction) => `/interaction/${interaction.uid}`,
    },
    ttl: {
      AccessToken: 3600,
      AuthorizationCode: 60,
      IdToken: idTokenTtl,
      Interaction: 3600,
      Session: 24 * 3600,
      Grant: 24 * 3600,
    },
    renderError,
    async findAccount(ctx, sub) {
      const user = userBySub(sub);
      if (!user) return undefined; // removed user: login / code exchange fails
      return {
        accountId: user.sub,
        async claims() {
          return {
            sub: user.sub,
            preferred_username: user.username,
            name: user.name ?? user.username,
            email: user.email,
            email_verified: user.email === undefined ? undefined : true,
            groups: user.groups ?? [],
          };
        },
      };
    },
  });

  provider.on('server_error', (ctx, err) => console.error('provider server_error:', err));
  return provider;
}

// Give the client every scope/claim it asked for (first-party client: no
// consent screen). Mirrors oidc-provider's documented consent handling.
async function autoGrant(provider, details, accountId) {
  const { params, prompt } = details;
  let grant;
  if (details.grantId) {
    grant = await provider.Grant.find(details.grantId);
    if (grant && grant.accountId !== accountId) grant = undefined; // another user signed in
  }
  if (!grant) {
    grant = new provider.Grant({ accountId, clientId: params.client_id });
  }
  if (params.scope) grant.addOIDCScope(String(params.scope));
  const d = prompt.details ?? {};
  if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
  if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
  if (d.missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(d.missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
  }
  return grant.save();
}

async function readForm(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 64 * 1024) throw new Error('body too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function sendHtml(res, status, body) {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  });
  res.end(body);
}

async function handleInteraction(provider, req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) {
    sendHtml(res, 400, '<p>interaction mismatch</p>');
    return;
  }

  if (req.method === 'GET' && !action) {
    if (details.prompt.name === 'login') {
      sendHtml(res, 200, loginPage(uid));
      return;
    }
    // Signed-in session but a consent is missing (e.g. new scope): grant it.
    const grantId = await autoGrant(provider, details, details.session.accountId);
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    return;
  }

  if (req.method === 'POST' && action === 'login') {
    const form = await readForm(req);
    const username = form.get('username') ?? '';
    const password = form.get('password') ?? '';
    const user = readUsers().find((u) => u.username === username);
    if (!user || !safeEqual(user.password ?? '', password)) {
      sendHtml(res, 200, loginPage(uid, { error: 'Invalid username or password', username }));
      return;
    }
    const grantId = await autoGrant(provider, details, user.sub);
    await provider.interactionFinished(req, res, {
      login: { accountId: user.sub },
      consent: { grantId },
    }, { mergeWithLastSubmission: false });
    return;
  }

  sendHtml(res, 405, '<p>method not allowed</p>');
}

let provider;
let callback;

server = http.createServer(async (req, res) => {
  const path = req.url.split('?')[0];
  const m = /^\/interaction\/([A-Za-z0-9_-]+)(?:\/(login))?\/?$/.exec(path);
  if (!provider) {
    sendHtml(res, 503, '<p>starting</p>');
    return;
  }
  if (!m) {
    callback(req, res);
    return;
  }
  try {
    await handleInteraction(provider, req, res, m[1], m[2]);
  } catch (err) {
    // e.g. SessionNotFound: interaction cookie missing or expired
    console.error('provider: interaction error:', err.expose ? `${err.error}: ${err.error_description}` : err);
    if (!res.headersSent) {
      sendHtml(res, err.statusCode ?? 500, `<h1>Error</h1><pre>${esc(err.error ?? err.name)}: ${esc(err.error_description ?? err.message)}</pre>`);
    } else {
      res.end();
    }
  }
});

// Clients pool keep-alive connections (reqwest/hyper for 90 s) and do not read
// the Keep-Alive header: a short server idle timeout races with their reuse.
server.keepAliveTimeout = 30_000;

server.listen(Number(config.port ?? 0), '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = config.issuer ?? `http://127.0.0.1:${port}`;
  provider = buildProvider(issuer);
  callback = provider.callback();
  process.stdout.write(`listening ${issuer}\n`);
});

server.on('error', (err) => {
  console.error('provider: server error:', err.message);
  process.exit(1);
});

// Opt-in: exit when our stdin is closed, i.e. when the test process that
// spawned us with a piped stdin died without sending SIGTERM.
if (config.exit_when_stdin_closes) {
  process.stdin.on('data', () => {});
  process.stdin.on('end', shutdown);
  process.stdin.on('error', shutdown);
}

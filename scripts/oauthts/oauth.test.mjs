// The TypeScript MCP SDK's OAuth client (the one most desktop clients build on) against hangar:
// knowing only hangar's /mcp URL, it discovers the authorization server, registers dynamically,
// sends the person through consent (played here with fetch, as a browser would), exchanges the
// code, and streams an exec with progress; revoking the grant then refuses it. run.sh starts
// hangar and passes its URL and admin token in HANGAR_URL and HANGAR_TOKEN.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const hangar = process.env.HANGAR_URL;
const admin = process.env.HANGAR_TOKEN;
const redirect = 'http://127.0.0.1:9/callback';

async function api(method, path, token, body) {
  const res = await fetch(new URL(path, hangar), {
    method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

// provider keeps what the SDK hands it in memory, and records the authorization URL.
function provider() {
  const p = { stored: {} };
  Object.assign(p, {
    get redirectUrl() { return redirect; },
    get clientMetadata() {
      return { client_name: 'TS SDK client', redirect_uris: [redirect], grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'], token_endpoint_auth_method: 'none' };
    },
    clientInformation() { return p.stored.info; },
    saveClientInformation(i) { p.stored.info = i; },
    tokens() { return p.stored.tokens; },
    saveTokens(t) { p.stored.tokens = t; },
    redirectToAuthorization(u) { p.stored.authURL = u; },
    saveCodeVerifier(v) { p.stored.verifier = v; },
    codeVerifier() { return p.stored.verifier; },
  });
  return p;
}

const entities = { '&amp;': '&', '&#43;': '+', '&#34;': '"', '&#39;': "'", '&lt;': '<', '&gt;': '>' };

// consent plays the person on the consent page: signs in with token, keeps mcp, binds the grant
// to sandbox, allows; it returns the code hangar sent back.
async function consent(authURL, token, sandbox) {
  const page = await fetch(authURL, { redirect: 'manual' });
  assert.equal(page.status, 200, 'the consent page');
  const cookie = page.headers.get('set-cookie').split(';')[0];
  const form = new URLSearchParams();
  for (const m of (await page.text()).matchAll(/<input type="hidden" name="([a-z_]+)" value="([^"]*)">/g)) {
    form.set(m[1], m[2].replace(/&(amp|#43|#34|#39|lt|gt);/g, (e) => entities[e]));
  }
  form.set('token', token);
  form.set('grant_scope', 'mcp');
  form.set('sandbox', sandbox);
  form.set('action', 'allow');
  const back = await fetch(new URL('/oauth/authorize', hangar), { method: 'POST', body: form, redirect: 'manual', headers: { cookie } });
  assert.equal(back.status, 303, `consent: ${await back.text()}`);
  const to = new URL(back.headers.get('location'));
  assert.equal(to.origin + to.pathname, redirect);
  return to.searchParams.get('code');
}

// connect connects the way an app does: on UnauthorizedError, the person consents, the app
// finishes the authorization and connects again.
async function connect(p, token, sandbox) {
  for (let attempt = 0; attempt < 2; attempt++) {
    const client = new Client({ name: 'hangar-oauthts', version: '1' });
    const transport = new StreamableHTTPClientTransport(new URL('/mcp', hangar), { authProvider: p });
    try {
      await client.connect(transport);
      return client;
    } catch (e) {
      if (!(e instanceof UnauthorizedError)) throw e;
      await transport.finishAuth(await consent(p.stored.authURL, token, sandbox));
    }
  }
  throw new Error('still unauthorized after consenting');
}

test('the TypeScript SDK authorizes, streams an exec, and is refused once its grant is revoked', async () => {
  const ada = await api('POST', '/api/tokens', admin, { user: 'ada', scopes: ['user', 'mcp'] });
  assert.equal(ada.status, 201);
  const sb = await api('POST', '/api/sandboxes', ada.body.token, { name: 'ts-box', provider: 'local' });
  assert.equal(sb.status, 201);

  const p = provider();
  const client = await connect(p, ada.body.token, 'ts-box');
  assert.match(p.stored.info.client_id, /^hc_/, 'registered dynamically');
  assert.equal(p.stored.tokens.scope, 'mcp');
  assert.ok(p.stored.tokens.refresh_token, 'a refresh token');

  const progress = [];
  const res = await client.callTool({ name: 'exec', arguments: { sandbox: 'ts-box', command: 'echo one; sleep 0.2; echo two', stream: true } },
    undefined, { onprogress: (n) => progress.push(n.message) });
  assert.equal(res.structuredContent.exit_code, 0);
  assert.equal(res.structuredContent.stdout, 'one\ntwo\n');
  assert.equal(progress.join(''), 'one\ntwo\n', 'the output came as progress notifications');

  const grants = await api('GET', '/api/oauth/grants', ada.body.token);
  assert.equal(grants.body.grants.length, 1);
  assert.equal(grants.body.grants[0].client_name, 'TS SDK client');
  assert.equal(grants.body.grants[0].sandbox, 'ts-box');
  assert.equal((await api('DELETE', `/api/oauth/grants/${grants.body.grants[0].id}`, ada.body.token)).status, 204);
  await assert.rejects(client.callTool({ name: 'exec', arguments: { sandbox: 'ts-box', command: 'true' } }),
    // A 401 makes the SDK refresh, and the refresh is refused: the grant is gone.
    (e) => /InvalidGrantError: The grant was revoked/.test(String(e)), 'a call after the grant was revoked');
  await client.close().catch(() => {});
  // A local sandbox's daemon outlives the server that started it: destroy it before run.sh
  // stops hangar.
  assert.equal((await api('DELETE', '/api/sandboxes/ts-box', ada.body.token)).status, 204);
});

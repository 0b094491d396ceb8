// E2B's JS SDK (2.51.0, pinned in package.json), unchanged, against hangar's E2B API (/e2b):
// the control calls (create with metadata and env, list with a metadata filter, getInfo,
// setTimeout, pause, connect by id, kill) and the errors the SDK raises from hangar's answers
// (a wrong API key, another user's sandbox, an unknown template, what hangar does not offer).
// The daemon calls (commands, files, pty) are daemon.test.mjs's.
//
// hangar.sh starts `hangar serve` (SQLite, the local or the docker provider) and sets HANGAR_URL,
// HANGAR_TOKEN (its admin token), E2B_API_URL and E2B_SANDBOX_URL; run it with `make e2b-compat`.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, AuthenticationError, NotFoundError, SandboxError } from 'e2b'

const hangar = process.env.HANGAR_URL
const admin = process.env.HANGAR_TOKEN
assert.ok(hangar && admin, 'run through hangar.sh: HANGAR_URL and HANGAR_TOKEN unset')

// The three variables an E2B user sets (docs/e2b.md): hangar.sh sets E2B_API_URL and
// E2B_SANDBOX_URL; E2B_API_KEY is ada's token, set below.
assert.ok(process.env.E2B_API_URL && process.env.E2B_SANDBOX_URL, 'run through hangar.sh: E2B_API_URL or E2B_SANDBOX_URL unset')

// hangarAPI calls hangar's own REST API.
async function hangarAPI(method, path, token, body) {
  const res = await fetch(`${hangar}/api${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : null }
}

async function userToken(user) {
  const r = await hangarAPI('POST', '/tokens', admin, { user, scopes: ['user'] })
  assert.equal(r.status, 201, JSON.stringify(r.body))
  return r.body.token
}

let ada, bob
before(async () => {
  ada = await userToken('ada')
  bob = await userToken('bob')
  process.env.E2B_API_KEY = ada
})

test('create with metadata and env: an ordinary hangar sandbox of the key\'s user', async () => {
  const sbx = await Sandbox.create({ metadata: { suite: 'api', run: '1' }, envs: { GREETING: 'hello from e2b' }, timeoutMs: 120_000 })
  try {
    assert.match(sbx.sandboxId, /^e2b-[a-z0-9]+$/)
    const info = await sbx.getInfo()
    assert.equal(info.sandboxId, sbx.sandboxId)
    assert.equal(info.templateId, 'base')
    assert.equal(info.state, 'running')
    assert.deepEqual(info.metadata, { suite: 'api', run: '1' })
    assert.ok(info.endAt.getTime() - info.startedAt.getTime() === 120_000, `${info.startedAt} .. ${info.endAt}`)
    // hangar's own API lists it as ada's, and its commands see the env.
    const mine = await hangarAPI('GET', `/sandboxes/${sbx.sandboxId}`, ada)
    assert.equal(mine.status, 200)
    assert.equal(mine.body.owner, 'ada')
    assert.deepEqual(mine.body.metadata, { suite: 'api', run: '1' })
    assert.equal(new Date(mine.body.end_at).getTime(), info.endAt.getTime())
    assert.equal(mine.body.on_timeout, 'kill')
    const run = await hangarAPI('POST', `/sandboxes/${sbx.sandboxId}/exec`, ada, { command: 'printf %s "$GREETING"' })
    assert.equal(run.status, 200, JSON.stringify(run.body))
    assert.equal(run.body.stdout, 'hello from e2b')
  } finally {
    assert.equal(await sbx.kill(), true)
  }
})

test('list with a metadata filter, and pages', async () => {
  const a = await Sandbox.create({ metadata: { suite: 'list', color: 'blue' } })
  const b = await Sandbox.create({ metadata: { suite: 'list', color: 'red' } })
  try {
    const blue = await Sandbox.list({ query: { metadata: { suite: 'list', color: 'blue' } } }).nextItems()
    assert.deepEqual(blue.map((s) => s.sandboxId), [a.sandboxId])
    assert.deepEqual(blue[0].metadata, { suite: 'list', color: 'blue' })
    const pages = Sandbox.list({ query: { metadata: { suite: 'list' } }, limit: 1 })
    const seen = []
    while (pages.hasNext) seen.push(...(await pages.nextItems()).map((s) => s.sandboxId))
    assert.deepEqual(seen.sort(), [a.sandboxId, b.sandboxId].sort())
    // bob lists none of ada's.
    const bobs = await Sandbox.list({ apiKey: bob, query: { metadata: { suite: 'list' } } }).nextItems()
    assert.deepEqual(bobs, [])
  } finally {
    await a.kill()
    await b.kill()
  }
})

test('setTimeout moves the end; pause, then connect by id resumes', async () => {
  const sbx = await Sandbox.create({ timeoutMs: 60_000 })
  try {
    await sbx.setTimeout(600_000)
    const info = await sbx.getInfo()
    const left = info.endAt.getTime() - Date.now()
    assert.ok(left > 500_000 && left <= 600_000, `${left} ms left`)
    assert.equal(await sbx.pause(), true)
    assert.equal(await sbx.pause(), false) // paused already
    assert.equal((await sbx.getInfo()).state, 'paused')
    const again = await Sandbox.connect(sbx.sandboxId)
    assert.equal(again.sandboxId, sbx.sandboxId)
    assert.equal((await again.getInfo()).state, 'running')
  } finally {
    await sbx.kill()
  }
})

test('expiry: a sandbox whose time is up is killed, or paused when asked', async () => {
  const killed = await Sandbox.create({ timeoutMs: 1000 })
  const paused = await Sandbox.create({ timeoutMs: 1000, lifecycle: { onTimeout: 'pause' } })
  try {
    // hangar ends them within a second or so of their end; the test's own timeout bounds the
    // waits, which only pace the polling.
    for (;;) {
      const gone = await Sandbox.getInfo(killed.sandboxId).then(() => false, (e) => {
        if (e instanceof NotFoundError) return true
        throw e
      })
      if (gone) break
      await new Promise((r) => setTimeout(r, 100))
    }
    while ((await paused.getInfo()).state !== 'paused') await new Promise((r) => setTimeout(r, 100))
    const resumed = await Sandbox.connect(paused.sandboxId, { timeoutMs: 60_000 })
    assert.equal((await resumed.getInfo()).state, 'running')
    assert.equal((await resumed.commands.run('echo back')).stdout, 'back\n')
  } finally {
    await paused.kill()
  }
})

test('kill: then not found, and kill again says false', async () => {
  const sbx = await Sandbox.create()
  assert.equal(await Sandbox.kill(sbx.sandboxId), true)
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), NotFoundError)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
})

test('a wrong API key is AuthenticationError', async () => {
  await assert.rejects(Sandbox.list({ apiKey: 'hgr_not-a-token' }).nextItems(), AuthenticationError)
  await assert.rejects(Sandbox.create({ apiKey: 'hgr_not-a-token' }), AuthenticationError)
})

test('another user\'s sandbox is not found, as E2B answers', async () => {
  const sbx = await Sandbox.create()
  try {
    await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: bob }), NotFoundError)
    await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey: bob }), NotFoundError)
    await assert.rejects(Sandbox.setTimeout(sbx.sandboxId, 1000, { apiKey: bob }), NotFoundError)
    assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey: bob }), false)
    assert.equal((await sbx.getInfo()).state, 'running') // still ada's, untouched
  } finally {
    await sbx.kill()
  }
})

test('an unknown template and what hangar does not offer say so', async () => {
  await assert.rejects(Sandbox.create('no-such-template'), (e) => {
    assert.ok(e instanceof SandboxError, `got ${e}`)
    assert.match(e.message, /404: .*no template "no-such-template"/)
    return true
  })
  const sbx = await Sandbox.create()
  try {
    await assert.rejects(sbx.getMetrics(), (e) => {
      assert.match(e.message, /501: hangar keeps no CPU, memory or disk metrics/)
      return true
    })
    await assert.rejects(Sandbox.create({ network: { denyOut: ['0.0.0.0/0'] } }), /501: hangar does not offer E2B's network rules/)
  } finally {
    await sbx.kill()
  }
})

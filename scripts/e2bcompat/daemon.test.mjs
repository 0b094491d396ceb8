// E2B's JS SDK, unchanged, making its daemon calls through hangar: E2B_SANDBOX_URL is
// $HANGAR_URL/e2b/sandbox, so every envd call goes to hangar's pass-through, which checks the
// sandbox's access token and passes the call to the sandbox's own daemon (docs/e2b-daemon.md).
//
// daemon.sh starts `hangar serve` (the local provider) and sets HANGAR_URL, HANGAR_TOKEN (an
// admin token) and E2B_SANDBOX_URL; run it with `make e2b-daemon`.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, AuthenticationError, RateLimitError, SandboxError, NotFoundError, TimeoutError } from 'e2b'

const { HANGAR_URL: hangar, HANGAR_TOKEN: admin, E2B_SANDBOX_URL: sandboxURL } = process.env
assert.ok(hangar && admin && sandboxURL, 'run through daemon.sh: HANGAR_URL, HANGAR_TOKEN or E2B_SANDBOX_URL unset')

// api calls hangar's own REST API.
async function api(method, path, token, body) {
  const res = await fetch(`${hangar}/api${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body && JSON.stringify(body),
  })
  const text = await res.text()
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`)
  return text ? JSON.parse(text) : undefined
}

// A user of hangar, ada, with her own token, and another, bob.
const ada = (await api('POST', '/tokens', admin, { user: 'ada', scopes: ['user'], description: 'e2b daemon test' })).token
const bob = (await api('POST', '/tokens', admin, { user: 'bob', scopes: ['user'], description: 'e2b daemon test' })).token

// sandboxFor is the SDK's Sandbox for a hangar sandbox, as Sandbox.connect(id) returns it.
// Until hangar's E2B API (POST /e2b/v2/sandboxes/{id}/connect) is merged, the sandbox is made
// with hangar's REST API and the SDK's Sandbox is constructed with hangar's token as its
// envdAccessToken, which the pass-through takes for now. Once it is: `return Sandbox.connect(name, {apiKey: token})`.
async function sandboxFor(name, token) {
  return new Sandbox({ sandboxId: name, envdAccessToken: token, envdVersion: '0.5.7' })
}

const name = `e2bd-${process.pid}`
const made = await api('POST', '/sandboxes', ada, { name })
after(() => api('DELETE', `/sandboxes/${name}`, ada))
const sbx = await sandboxFor(name, ada)
const home = made.workdir ?? (await sbx.commands.run('pwd')).stdout.trim()

// until resolves once pred() holds, polling each event-loop turn; the test's own timeout
// bounds it (no sleeps decide anything).
async function until(pred) {
  while (!pred()) await new Promise((r) => setImmediate(r))
}

test('commands.run streams stdout and stderr as they are printed', async () => {
  const out = []
  const err = []
  // The command prints a line, then waits for a file the test writes only once that line
  // arrived: output held back to the end would never let it finish.
  const p = sbx.commands.run('echo one; echo oops >&2; while [ ! -e go ]; do sleep 0.05; done; echo two', {
    cwd: home,
    onStdout: (d) => out.push(d),
    onStderr: (d) => err.push(d),
  })
  await until(() => out.join('') === 'one\n' && err.join('') === 'oops\n')
  await sbx.files.write(`${home}/go`, '')
  const r = await p
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'one\ntwo\n')
  assert.equal(out.join(''), 'one\ntwo\n')
  assert.equal(r.stderr, 'oops\n')
})

test('commands: a non-zero exit throws CommandExitError', async () => {
  await assert.rejects(sbx.commands.run('echo partial; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, `got ${e}`)
    assert.equal(e.exitCode, 3)
    assert.equal(e.stdout, 'partial\n')
    return true
  })
})

test('commands: background, connect, sendStdin, list, kill', async () => {
  const h = await sbx.commands.run('echo started; read line; echo "got:$line"; sleep 30', { background: true, stdin: true })
  assert.ok(h.pid > 0)
  await until(() => h.stdout === 'started\n')
  assert.ok((await sbx.commands.list()).some((p) => p.pid === h.pid), 'the background command is listed')
  const seen = []
  const attached = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) })
  await sbx.commands.sendStdin(h.pid, 'hello\n')
  await until(() => h.stdout === 'started\ngot:hello\n' && seen.join('') === 'got:hello\n')
  assert.equal(await sbx.commands.kill(h.pid), true)
  for (const handle of [h, attached]) {
    await assert.rejects(handle.wait(), (e) => {
      assert.ok(e instanceof CommandExitError, `got ${e}`)
      assert.equal(e.exitCode, -1)
      return true
    })
  }
  assert.equal((await sbx.commands.list()).some((p) => p.pid === h.pid), false)
})

test('files: write, read, list, exists, rename, makeDir, remove', async () => {
  const dir = `${home}/files`
  assert.equal(await sbx.files.makeDir(dir), true)
  await sbx.files.write(`${dir}/a.txt`, 'alpha')
  await sbx.files.write([
    { path: `${dir}/b.txt`, data: 'beta' },
    { path: `${dir}/sub/c.txt`, data: 'gamma' },
  ])
  assert.equal(await sbx.files.read(`${dir}/a.txt`), 'alpha')
  assert.equal(await sbx.files.read(`${dir}/sub/c.txt`), 'gamma')
  const big = 'x'.repeat(3 << 20) // past hangar's 1 MiB REST body limit: the pass-through has none
  await sbx.files.write(`${dir}/big.txt`, big)
  assert.equal((await sbx.files.read(`${dir}/big.txt`)).length, big.length)
  const names = (await sbx.files.list(dir)).map((e) => e.name).sort()
  assert.deepEqual(names, ['a.txt', 'b.txt', 'big.txt', 'sub'])
  assert.equal(await sbx.files.exists(`${dir}/a.txt`), true)
  await sbx.files.rename(`${dir}/a.txt`, `${dir}/renamed.txt`)
  assert.equal(await sbx.files.exists(`${dir}/a.txt`), false)
  assert.equal(await sbx.files.read(`${dir}/renamed.txt`), 'alpha')
  await sbx.files.remove(`${dir}/renamed.txt`)
  assert.equal(await sbx.files.exists(`${dir}/renamed.txt`), false)
  await assert.rejects(sbx.files.read(`${dir}/nope.txt`), (e) => e instanceof NotFoundError)
})

test('files: watchDir sends events', async () => {
  const dir = `${home}/watched`
  await sbx.files.makeDir(dir)
  const events = []
  const w = await sbx.files.watchDir(dir, (ev) => events.push(ev))
  try {
    await sbx.files.write(`${dir}/new.txt`, 'x')
    await until(() => events.some((e) => e.name === 'new.txt' && e.type === 'create'))
  } finally {
    await w.stop()
  }
})

test('pty: create, sendInput, resize', async () => {
  const out = []
  const dec = new TextDecoder()
  const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => out.push(dec.decode(d)) })
  await sbx.pty.resize(t.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(t.pid, new TextEncoder().encode('stty size; exit\n'))
  const r = await t.wait()
  assert.equal(r.exitCode, 0)
  assert.match(out.join(''), /30 100/)
})

test('a wrong access token is AuthenticationError', async () => {
  const wrong = await sandboxFor(name, 'hgr_not-a-token')
  await assert.rejects(wrong.files.list(home), (e) => {
    assert.ok(e instanceof AuthenticationError, `got ${e?.constructor?.name}: ${e}`)
    return true
  })
})

test("another user's sandbox is not found, as E2B answers for a sandbox it does not run", async () => {
  const asBob = await sandboxFor(name, bob)
  await assert.rejects(asBob.commands.run('true'), (e) => {
    assert.ok(e instanceof SandboxError, `got ${e?.constructor?.name}: ${e}`)
    assert.match(String(e.message), /not running|not found/i)
    return true
  })
  await assert.rejects(asBob.files.list(home), (e) => {
    assert.ok(e instanceof TimeoutError || e instanceof NotFoundError, `got ${e?.constructor?.name}: ${e}`)
    return true
  })
})

test('revoking the token ends its open stream', async () => {
  const t = await api('POST', '/tokens', admin, { user: 'ada', scopes: ['user'], description: 'revoked mid-stream' })
  const s = await sandboxFor(name, t.token)
  const h = await s.commands.run('echo up; sleep 60', { background: true })
  await until(() => h.stdout === 'up\n')
  await api('DELETE', `/tokens/${t.id}`, admin)
  await assert.rejects(h.wait(), (e) => {
    assert.ok(e instanceof AuthenticationError, `got ${e?.constructor?.name}: ${e}`)
    assert.match(e.message, /revoked/)
    return true
  })
  // and its command is killed, as a revoked token's streamed command is
  while ((await sbx.commands.list()).some((p) => p.pid === h.pid)) await new Promise((r) => setImmediate(r))
})

test('destroying the sandbox ends its open stream', async () => {
  const other = `${name}-gone`
  await api('POST', '/sandboxes', ada, { name: other })
  const s = await sandboxFor(other, ada)
  const h = await s.commands.run('echo up; sleep 60', { background: true })
  await until(() => h.stdout === 'up\n')
  await api('DELETE', `/sandboxes/${other}`, ada)
  await assert.rejects(h.wait(), (e) => {
    assert.ok(e instanceof SandboxError, `got ${e?.constructor?.name}: ${e}`)
    return true
  })
  await assert.rejects(s.commands.run('true'), (e) => e instanceof SandboxError, 'a destroyed sandbox is not found')
})

test('streams past the token limit are RateLimitError', async () => {
  // daemon.sh sets HANGAR_STREAM_MAX_PER_TOKEN=4 for this.
  const t = (await api('POST', '/tokens', admin, { user: 'ada', scopes: ['user'], description: 'limits' })).token
  const s = await sandboxFor(name, t)
  const hs = []
  for (let i = 0; i < 4; i++) hs.push(await s.commands.run('sleep 60', { background: true }))
  await assert.rejects(s.commands.run('sleep 60', { background: true }), (e) => {
    assert.ok(e instanceof RateLimitError, `got ${e?.constructor?.name}: ${e}`)
    assert.match(e.message, /HANGAR_STREAM_MAX_PER_TOKEN/)
    return true
  })
  for (const h of hs) await h.kill()
})

test("the streams show in hangar's metrics under their own kind", async () => {
  const text = await (await fetch(`${hangar}/metrics`)).text()
  for (const reason of ['done', 'revoked', 'destroyed']) {
    const line = text.split('\n').find((l) => l.startsWith(`hangar_streams{kind="e2b",reason="${reason}"}`))
    assert.ok(line && Number(line.split(' ').at(-1)) > 0, `no hangar_streams{kind="e2b",reason="${reason}"} above 0 in /metrics`)
  }
  assert.ok(/^hangar_stream_bytes\{kind="e2b"\} [1-9]/m.test(text), 'hangar_stream_bytes{kind="e2b"} is not above 0')
})

// E2B's JS SDK, unchanged, making its daemon calls through hangar: E2B_SANDBOX_URL is
// $HANGAR_URL/e2b/sandbox, so every envd call goes to hangar's pass-through, which checks the
// sandbox's access token (the envdAccessToken hangar's E2B API handed out) and passes the call
// to the sandbox's own daemon (docs/e2b.md).
//
// hangar.sh starts `hangar serve` (the local or the docker provider) and sets HANGAR_URL,
// HANGAR_TOKEN (an admin token), E2B_API_URL and E2B_SANDBOX_URL; run it with `make e2b-compat`.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, AuthenticationError, RateLimitError, SandboxError, NotFoundError } from 'e2b'

const { HANGAR_URL: hangar, HANGAR_TOKEN: admin, E2B_API_URL: apiURL, E2B_SANDBOX_URL: sandboxURL } = process.env
assert.ok(hangar && admin && apiURL && sandboxURL, 'run through hangar.sh: HANGAR_URL, HANGAR_TOKEN, E2B_API_URL or E2B_SANDBOX_URL unset')

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

// A user of hangar, ada, with her own token (her E2B_API_KEY), and another, bob.
const ada = (await api('POST', '/tokens', admin, { user: 'ada', scopes: ['user'], description: 'e2b daemon test' })).token
const bob = (await api('POST', '/tokens', admin, { user: 'bob', scopes: ['user'], description: 'e2b daemon test' })).token
process.env.E2B_API_KEY = ada

const sbx = await Sandbox.create({ metadata: { suite: 'daemon' } })
after(() => sbx.kill())
const name = sbx.sandboxId
const home = (await sbx.commands.run('pwd')).stdout.trim()

// forged is the SDK's Sandbox for sandbox id with an access token hangar did not hand out for
// it, as an attacker would build one.
function forged(id, envdAccessToken) {
  return new Sandbox({ sandboxId: id, envdAccessToken, envdVersion: '0.6.4' })
}

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
  const wrong = forged(name, 'hgr_not-a-token')
  await assert.rejects(wrong.files.list(home), (e) => {
    assert.ok(e instanceof AuthenticationError, `got ${e?.constructor?.name}: ${e}`)
    return true
  })
})

test("another user's access token does not open ada's sandbox", async () => {
  // bob's own sandbox's access token, sent for ada's sandbox: the token was handed out for
  // another sandbox, so it is refused as E2B's envd refuses a wrong token (401).
  const his = await Sandbox.create({ apiKey: bob })
  after(() => his.kill())
  assert.equal((await his.commands.run('echo mine')).stdout, 'mine\n')
  const asBob = forged(name, his.envdAccessToken)
  for (const call of [() => asBob.commands.run('true'), () => asBob.files.list(home), () => asBob.files.write(`${home}/x`, 'x')]) {
    await assert.rejects(call(), (e) => {
      assert.ok(e instanceof AuthenticationError, `got ${e?.constructor?.name}: ${e}`)
      return true
    })
  }
  assert.equal(await sbx.files.exists(`${home}/x`), false)
})

test('revoking the token ends its open stream', async () => {
  const t = await api('POST', '/tokens', admin, { user: 'ada', scopes: ['user'], description: 'revoked mid-stream' })
  const s = await Sandbox.connect(name, { apiKey: t.token })
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
  const s = await Sandbox.create()
  const h = await s.commands.run('echo up; sleep 60', { background: true })
  await until(() => h.stdout === 'up\n')
  assert.equal(await s.kill(), true)
  await assert.rejects(h.wait(), (e) => {
    assert.ok(e instanceof SandboxError, `got ${e?.constructor?.name}: ${e}`)
    return true
  })
  await assert.rejects(s.commands.run('true'), (e) => e instanceof SandboxError, 'a destroyed sandbox is not found')
})

test('streams past the token limit are RateLimitError', async () => {
  // hangar.sh sets HANGAR_STREAM_MAX_PER_TOKEN=4 for this.
  const t = (await api('POST', '/tokens', admin, { user: 'ada', scopes: ['user'], description: 'limits' })).token
  const s = await Sandbox.connect(name, { apiKey: t })
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

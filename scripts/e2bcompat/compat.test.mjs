// E2B's JS SDK (debug mode: no E2B API, straight to an envd) against `hangar envd`. Each
// assertion is what E2B's own envd answers (its source, packages/envd of e2b-dev/infra, and
// the SDK's documented results), so a failure here is a difference a user of the SDK sees.
//
// run.sh starts the daemon and sets E2B_SANDBOX_URL (its address) and WORKDIR (its working
// directory, a fresh temporary one); run it with `make e2b-compat`.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, TimeoutError, SandboxError, NotFoundError } from 'e2b'

const workdir = process.env.WORKDIR
assert.ok(workdir && process.env.E2B_SANDBOX_URL, 'run through run.sh: WORKDIR and E2B_SANDBOX_URL unset')

// debug: the SDK talks to the envd at E2B_SANDBOX_URL and to no E2B API.
const sbx = await Sandbox.create({ debug: true })

// until resolves once pred() holds, polling each event-loop turn; the test's own timeout
// bounds it (no sleeps decide anything).
async function until(pred) {
  while (!pred()) await new Promise((r) => setImmediate(r))
}

test('commands: run with callbacks', async () => {
  const out = []
  const err = []
  const r = await sbx.commands.run('echo out; echo err >&2', {
    onStdout: (d) => out.push(d),
    onStderr: (d) => err.push(d),
  })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'out\n')
  assert.equal(r.stderr, 'err\n')
  assert.equal(out.join(''), 'out\n')
  assert.equal(err.join(''), 'err\n')
})

test('commands: a non-zero exit throws CommandExitError', async () => {
  await assert.rejects(sbx.commands.run('echo partial; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, `got ${e}`)
    assert.equal(e.exitCode, 3)
    assert.equal(e.stdout, 'partial\n')
    assert.equal(e.error, 'exit status 3')
    return true
  })
})

test('commands: cwd and envs', async () => {
  const r = await sbx.commands.run('pwd; echo $GREETING', { cwd: workdir, envs: { GREETING: 'hi' } })
  assert.equal(r.stdout, `${workdir}\nhi\n`)
})

test('commands: the lifetime passing throws TimeoutError (deadline_exceeded)', async () => {
  await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 500 }), (e) => {
    assert.ok(e instanceof TimeoutError, `got ${e?.constructor?.name}: ${e}`)
    return true
  })
})

// The SDK's own timer may end the call first; this asks the daemon alone, as the SDK sends
// Start (Connect, JSON), what ends a stream whose Connect-Timeout-Ms passed.
test('commands: the daemon ends a Start stream at its lifetime with deadline_exceeded', async () => {
  const msg = Buffer.from(JSON.stringify({ process: { cmd: '/bin/sh', args: ['-c', 'echo before; sleep 30'] } }))
  const head = Buffer.alloc(5)
  head.writeUInt32BE(msg.length, 1)
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/Start`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1', 'Connect-Timeout-Ms': '300' },
    body: Buffer.concat([head, msg]),
  })
  assert.equal(res.status, 200)
  const body = Buffer.from(await res.arrayBuffer())
  const messages = []
  for (let at = 0; at < body.length; ) {
    const len = body.readUInt32BE(at + 1)
    messages.push({ flags: body[at], json: JSON.parse(body.subarray(at + 5, at + 5 + len).toString()) })
    at += 5 + len
  }
  const last = messages.at(-1)
  assert.equal(last.flags & 2, 2, 'the last message ends the stream')
  assert.equal(last.json.error?.code, 'deadline_exceeded', JSON.stringify(last.json))
  assert.equal(messages.some((m) => m.json.event?.end), false, 'no end event before the error')
  const stdout = messages.map((m) => m.json.event?.data?.stdout).filter(Boolean)
  assert.deepEqual(stdout.map((b) => Buffer.from(b, 'base64').toString()), ['before\n'])
})

test('commands: background, list, connect, kill', async () => {
  const h = await sbx.commands.run('echo started; sleep 30', { background: true })
  assert.ok(h.pid > 0)
  await until(() => h.stdout === 'started\n')
  const listed = (await sbx.commands.list()).find((p) => p.pid === h.pid)
  assert.ok(listed, 'the background command is listed')
  assert.equal(listed.cmd, '/bin/bash')
  assert.deepEqual(listed.args, ['-l', '-c', 'echo started; sleep 30'])

  const attached = await sbx.commands.connect(h.pid)
  assert.equal(attached.pid, h.pid)

  assert.equal(await sbx.commands.kill(h.pid), true)
  for (const handle of [h, attached]) {
    await assert.rejects(handle.wait(), (e) => {
      assert.ok(e instanceof CommandExitError, `got ${e}`)
      assert.equal(e.exitCode, -1)
      assert.equal(e.error, 'signal: killed')
      return true
    })
  }
  assert.equal(await sbx.commands.kill(h.pid), false, 'killing an ended process')
  assert.equal(await sbx.commands.kill(999999), false, 'killing an unknown pid')
  assert.equal((await sbx.commands.list()).some((p) => p.pid === h.pid), false)
})

test('commands: stdin', async () => {
  const h = await sbx.commands.run('read line; echo "got:$line"; cat', { background: true, stdin: true })
  await h.sendStdin('hello\n')
  await until(() => h.stdout === 'got:hello\n')
  await h.sendStdin('rest')
  await h.closeStdin()
  const r = await h.wait()
  assert.equal(r.stdout, 'got:hello\nrest')
  assert.equal(r.exitCode, 0)
})

test('commands: stdin to a command started without it is refused', async () => {
  const h = await sbx.commands.run('sleep 30', { background: true })
  try {
    // E2B's envd answers `internal`; both are a SandboxError to the SDK, saying stdin.
    await assert.rejects(h.sendStdin('x'), (e) => {
      assert.ok(e instanceof SandboxError, `got ${e}`)
      assert.match(e.message, /stdin/)
      return true
    })
  } finally {
    await h.kill()
  }
})

test('commands: connect to an unknown pid is NotFoundError', async () => {
  await assert.rejects(sbx.commands.connect(999999), (e) => e instanceof NotFoundError)
})

test('commands: stdin off gives end of file at once', async () => {
  const r = await sbx.commands.run('cat; echo done')
  assert.equal(r.stdout, 'done\n')
})

test('files: write one and read it', async () => {
  const info = await sbx.files.write(`${workdir}/one.txt`, 'one')
  assert.equal(info.name, 'one.txt')
  assert.equal(info.path, `${workdir}/one.txt`)
  assert.equal(info.type, 'file')
  assert.equal(await sbx.files.read(`${workdir}/one.txt`), 'one')
  const bytes = await sbx.files.read(`${workdir}/one.txt`, { format: 'bytes' })
  assert.deepEqual(Array.from(bytes), Array.from(Buffer.from('one')))
})

test('files: write several, each at its full path', async () => {
  const infos = await sbx.files.write([
    { path: `${workdir}/several/a/x.txt`, data: 'x' },
    { path: `${workdir}/several/b/y.txt`, data: 'y' },
  ])
  assert.deepEqual(
    infos.map((i) => [i.path, i.name, i.type]),
    [
      [`${workdir}/several/a/x.txt`, 'x.txt', 'file'],
      [`${workdir}/several/b/y.txt`, 'y.txt', 'file'],
    ],
  )
  assert.equal(await sbx.files.read(`${workdir}/several/a/x.txt`), 'x')
  assert.equal(await sbx.files.read(`${workdir}/several/b/y.txt`), 'y')
  assert.equal(await sbx.files.exists(`${workdir}/x.txt`), false, 'not in the workdir under its base name')
})

test('files: list, exists, getInfo', async () => {
  await sbx.files.write(`${workdir}/listed/f.txt`, 'four')
  await sbx.files.makeDir(`${workdir}/listed/d`)
  const entries = await sbx.files.list(`${workdir}/listed`)
  assert.deepEqual(
    entries.map((e) => [e.name, e.type, e.path]).sort(),
    [
      ['d', 'dir', `${workdir}/listed/d`],
      ['f.txt', 'file', `${workdir}/listed/f.txt`],
    ],
  )
  assert.equal(await sbx.files.exists(`${workdir}/listed/f.txt`), true)
  assert.equal(await sbx.files.exists(`${workdir}/listed/missing`), false)
  const info = await sbx.files.getInfo(`${workdir}/listed/f.txt`)
  assert.equal(info.name, 'f.txt')
  assert.equal(info.type, 'file')
  assert.equal(info.path, `${workdir}/listed/f.txt`)
  assert.equal(info.size, 4)
  assert.equal(info.permissions, '-rw-r--r--')
  assert.ok(info.modifiedTime instanceof Date)
  assert.equal((await sbx.files.getInfo(`${workdir}/listed/d`)).type, 'dir')
})

test('files: rename, remove, makeDir', async () => {
  await sbx.files.write(`${workdir}/mv/src.txt`, 'moved')
  const moved = await sbx.files.rename(`${workdir}/mv/src.txt`, `${workdir}/mv/dst.txt`)
  assert.equal(moved.path, `${workdir}/mv/dst.txt`)
  assert.equal(moved.name, 'dst.txt')
  assert.equal(await sbx.files.read(`${workdir}/mv/dst.txt`), 'moved')
  assert.equal(await sbx.files.exists(`${workdir}/mv/src.txt`), false)

  await sbx.files.remove(`${workdir}/mv/dst.txt`)
  assert.equal(await sbx.files.exists(`${workdir}/mv/dst.txt`), false)
  await sbx.files.remove(`${workdir}/mv/never-there`) // E2B's envd: os.RemoveAll, no error

  assert.equal(await sbx.files.makeDir(`${workdir}/made/deep/dir`), true)
  assert.equal(await sbx.files.makeDir(`${workdir}/made/deep/dir`), false, 'an existing directory')
  assert.equal((await sbx.files.getInfo(`${workdir}/made/deep`)).type, 'dir')
})

test('files: watchDir', async () => {
  const dir = `${workdir}/watched`
  await sbx.files.makeDir(dir)
  const events = []
  const handle = await sbx.files.watchDir(dir, (e) => events.push(e))
  try {
    await sbx.files.write(`${dir}/new.txt`, 'n')
    await until(() => events.some((e) => e.name === 'new.txt' && e.type === 'create'))
    await sbx.files.remove(`${dir}/new.txt`)
    await until(() => events.some((e) => e.name === 'new.txt' && e.type === 'remove'))
  } finally {
    await handle.stop()
  }
})

test('pty: create, input, resize, output, exit', async () => {
  const chunks = []
  const decoder = new TextDecoder()
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => chunks.push(decoder.decode(d, { stream: true })) })
  assert.ok(h.pid > 0)
  await sbx.pty.resize(h.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size; echo "pty:$((6*7))"\n'))
  await until(() => chunks.join('').includes('pty:42'))
  assert.match(chunks.join(''), /30 100/)
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('exit 0\n'))
  const r = await h.wait()
  assert.equal(r.exitCode, 0)
})

test('pty: kill', async () => {
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
  assert.equal(await sbx.pty.kill(h.pid), true)
  await assert.rejects(h.wait(), (e) => {
    assert.ok(e instanceof CommandExitError, `got ${e}`)
    assert.equal(e.exitCode, -1)
    return true
  })
})

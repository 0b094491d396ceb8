// Package hostile holds hangar's hostile-agent suite and nothing else: its tests start a real
// `hangar serve` per provider (local and Docker under `make test`, Kubernetes under `make
// test-k8s`), make a sandbox, and from inside it, as the sandbox's user and as a split
// session's agent, try what a hostile agent would: read the daemon's token, forge a process
// tag, swap a turn's directory, escape a turn, fill the disk, exhaust processes, reach hangar's
// port. Each attack's outcome is what the run observed; a test fails when an attack that must
// be contained succeeds. Each provider's outcomes are kept in testdata/<provider>.json, and the
// table in docs/security.md is composed from those files (HANGAR_UPDATE_DOCS=1 rewrites both).
package hostile

// Package faults holds hangar's fault suite and nothing else: its tests start real `hangar
// serve` processes, open every kind of work in a local and a Docker sandbox (a turn, a job, a
// background process with an attach stream, a streamed exec, a watch, a session's event
// stream), break what lies beneath it (the sandbox's daemon, its container, the sandbox, hangar
// itself, its PostgreSQL, its disk, the daemon's descriptors) and check that each piece of work
// ends within its bound with the state and reason docs/reliability.md says, that no event is
// recorded twice or lost, and that none of the agent's processes is left running. The table in
// docs/reliability.md is generated from the suite's expectations (HANGAR_UPDATE_DOCS=1).
package faults

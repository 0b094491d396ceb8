// Package runlog reads an agent's run log: Classify turns one line (Claude Code's stream-json,
// Codex's exec --json, or anything else, kept as it is) into what it says, and Summary adds
// lines up for a person. It depends on nothing of hangar's, so the turn harness that runs
// inside a sandbox (hangar-envd harness) carries it without the control plane.
package runlog

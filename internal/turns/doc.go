// Package turns is agent sessions, their turns and jobs: what runs an agent in a sandbox under
// `hangar harness`, and what turns its run log into recorded events. Classify and Summary read
// Claude Code's stream-json and Codex's exec --json lines; any other line is kept as it is.
package turns

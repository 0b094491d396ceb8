// Package sandboxcmd is the commands that run inside a sandbox: Envd (the daemon) and
// Harness (one turn of an agent). They are the verbs of hangar-envd, the small binary every
// provider places in its sandboxes, and hangar carries them too (`hangar envd`, `hangar
// harness`) for development. Like cmd/, and unlike other packages, it reads flags and the
// environment. It must stay free of the control plane: cmd/hangar-envd's imports test lists
// what it may pull in.
package sandboxcmd

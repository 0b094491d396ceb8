// Package sandboxcmd is the commands that run inside a sandbox: Envd (the daemon), Harness
// (one turn of an agent), Tail, TurnDir and Install. They are the verbs of hangar-envd, the
// small binary every provider places in its sandboxes, and hangar carries them too (`hangar
// envd`, `hangar harness`) for development; each binary dispatches them itself, and each gets
// the name its help shows. Like cmd/, and unlike other packages, it reads flags (through
// internal/settings) and the environment. It must stay free of the control plane:
// cmd/hangar-envd's imports test lists what it may pull in.
package sandboxcmd

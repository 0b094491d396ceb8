package sandboxcmd

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"

	"github.com/hangar-dev/hangar/internal/harness"
	"github.com/hangar-dev/hangar/internal/settings"
)

const turnDirSummary = `Makes, writes and reads a turn's directory, as the control plane asks through the daemon:
  turn-dir make --id ID [--root DIR] [--base64 DATA]   make ROOT/ID (0700) and print its path; DATA (base64) starts its prompt
  turn-dir append --dir DIR --base64 DATA              append DATA (base64) to DIR/prompt
  turn-dir read --dir DIR --file NAME [--offset N] [--limit N]   print NAME (or a part); exit 3 when it is not there
  turn-dir check --dir DIR                             exit 0 when DIR is a turn's directory hangar alone controls
Every path is walked from / without following a symlink; every directory on the way must be
root's or this uid's and writable by no other (sticky ones aside), the turn's directory and its
files this uid's alone. Otherwise it says why and exits 4: the turn's outcome is never read
from a place another uid could write. Any other failure exits 1, saying why.`

// Exit codes of turn-dir besides 0 and 1 (a bad flag, or any other failure, which may pass: too
// many open files, no memory). None is 2, what hangar-envd exits with for an unknown verb:
// that is how the control plane tells a hangar-envd older than turn-dir (internal/turns
// restates these).
const (
	// ExitTurnFileMissing: read found no such file (the harness has not written it yet).
	ExitTurnFileMissing ExitCode = 3
	// ExitNotPrivate: the directory, one above it or the file is not hangar's alone
	// (harness.ErrNotPrivate); what it says is on stdout.
	ExitNotPrivate ExitCode = 4
)

// TurnDir runs the turn-dir verb (`hangar-envd turn-dir`, `hangar turn-dir`): the only way the
// control plane makes, writes and reads a turn's directory (see harness.MakeTurnDir).
func TurnDir(_ context.Context, cmd string, args []string, stdout, _ io.Writer) error {
	if err := hideMemory(); err != nil { // the prompt passes through it
		return err
	}
	action := ""
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		action, args = args[0], args[1:]
	}
	var id, root, dir, file, data string
	offset, limit := 0, -1
	ss := []settings.Setting{
		{Name: "id", Arg: "ID", Usage: "make: the turn's id, the directory's name", Value: settings.String{P: &id}},
		{Name: "root", Arg: "DIR", Usage: "make: the directory turns' directories go in; none: " + harness.DefaultTurnRoot(), Value: settings.String{P: &root}},
		{Name: "dir", Arg: "DIR", Usage: "the turn's directory", Value: settings.String{P: &dir}},
		{Name: "file", Arg: "NAME", Usage: "read: the file in it", Value: settings.String{P: &file}},
		{Name: "base64", Arg: "DATA", Usage: "make, append: what to append to the prompt, base64-encoded", Value: settings.String{P: &data}},
		{Name: "offset", Arg: "N", Usage: "read: from this byte on", Value: settings.Int{P: &offset, Max: math.MaxInt}},
		{Name: "limit", Arg: "N", Usage: "read: at most this many bytes; none: to the end", Value: settings.Int{P: &limit, Min: -1, Max: math.MaxInt}},
	}
	if err := settings.Parse(cmd, turnDirSummary, "HANGAR_TURN_DIR_", ss, args, settings.NoEnv, stdout); err != nil {
		return err
	}
	err := turnDir(action, id, root, dir, file, data, int64(offset), int64(limit), stdout)
	if errors.Is(err, harness.ErrNotPrivate) {
		fmt.Fprintf(stdout, "%s %s: %v\n", cmd, action, err)
		return ExitNotPrivate
	}
	return err
}

// turnDir does action, the verb's flags parsed.
func turnDir(action, id, root, dir, file, data string, offset, limit int64, stdout io.Writer) error {
	piece, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return fmt.Errorf("--base64: %w", err)
	}
	switch action {
	case "make":
		if root == "" {
			root = harness.DefaultTurnRoot()
		}
		made, err := harness.MakeTurnDir(root, id)
		if err != nil {
			return err
		}
		if err := appendPrompt(made, piece); err != nil {
			return err
		}
		fmt.Fprintln(stdout, made)
		return nil
	case "append":
		return appendPrompt(dir, piece)
	case "read":
		d, err := harness.OpenTurnDir(dir)
		if err != nil {
			return err
		}
		defer d.Close()
		err = harness.ReadTurnFile(d, file, offset, limit, stdout)
		if errors.Is(err, fs.ErrNotExist) {
			return ExitTurnFileMissing
		}
		return err
	case "check":
		d, err := harness.OpenTurnDir(dir)
		if err != nil {
			return err
		}
		return d.Close()
	}
	return fmt.Errorf("say make, append, read or check, not %q", action)
}

// appendPrompt appends piece to dir's prompt file, making it if it is not there.
func appendPrompt(dir string, piece []byte) error {
	d, err := harness.OpenTurnDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return harness.AppendTurnFile(d, harness.PromptFile, piece)
}

package sandboxcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"

	"github.com/hangar-dev/hangar/internal/harness"
	"github.com/hangar-dev/hangar/internal/settings"
)

const turnPollSummary = `Reads a turn's status file, then its run log from an offset, in one go: the turn watcher's poll.
  turn-poll --dir DIR [--offset N] [--limit N] [--pid PID --start TICKS]
It prints one line, STATE STATUS-BYTES LOG-ROOM, then the status file (STATUS-BYTES of it), then
at most LOG-ROOM bytes of the run log from --offset (what --limit leaves once the line and the
status are counted; none when the run log is not there yet). STATE is "ended" when the status
file is there; else "running" while the harness PID (started at TICKS, /proc/PID/stat's
starttime; 0: its process group) runs, "gone" once it does not and still no status file was
written. The status is read before the log: a status seen with a log read to its end means the
run log holds nothing more. The directory and its files are checked as turn-dir checks them:
when one is not hangar's alone it says why and exits 4. Any other failure exits 1, saying why.`

// turnPollHead bounds the length of turn-poll's first line, which --limit counts.
const turnPollHead = 64

// TurnPoll runs the turn-poll verb (`hangar-envd turn-poll`, `hangar turn-poll`): one start of
// hangar's binary per poll of a turn, where turn-dir read took two or three and a shell.
// A hangar-envd older than it answers exit 2 (an unknown verb): the control plane then reads
// with turn-dir read.
func TurnPoll(_ context.Context, cmd string, args []string, stdout, _ io.Writer) error {
	if err := hideMemory(); err != nil { // the run log passes through it, as through turn-dir read
		return err
	}
	var dir string
	offset, limit, pid, start := 0, 256<<10, 0, 0
	ss := []settings.Setting{
		{Name: "dir", Arg: "DIR", Usage: "the turn's directory", Value: settings.String{P: &dir, Check: settings.NonEmpty}},
		{Name: "offset", Arg: "N", Usage: "read the run log from this byte on", Value: settings.Int{P: &offset, Max: math.MaxInt}},
		{Name: "limit", Arg: "N", Usage: "print at most this many bytes in all (the first line, the status, the log)", Value: settings.Int{P: &limit, Max: math.MaxInt}},
		{Name: "pid", Arg: "PID", Usage: "the turn's harness (its process group); 0: not asked", Value: settings.Int{P: &pid, Max: math.MaxInt32}},
		{Name: "start", Arg: "TICKS", Usage: "the harness's start time (/proc/PID/stat starttime); 0: not known", Value: settings.Int{P: &start, Max: math.MaxInt}},
	}
	if err := settings.Parse(cmd, turnPollSummary, "HANGAR_TURN_POLL_", ss, args, settings.NoEnv, stdout); err != nil {
		return err
	}
	out, err := turnPoll(dir, int64(offset), limit, pid, uint64(start))
	if errors.Is(err, harness.ErrNotPrivate) {
		fmt.Fprintf(stdout, "%s: %v\n", cmd, err)
		return ExitNotPrivate
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// turnPoll is turn-poll's answer, its flags parsed: held whole, so a failure part way prints
// nothing but why.
func turnPoll(dir string, offset int64, limit, pid int, start uint64) ([]byte, error) {
	d, err := harness.OpenTurnDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var status bytes.Buffer
	state, err := "ended", harness.ReadTurnFile(d, harness.StatusFile, 0, -1, &status)
	if errors.Is(err, fs.ErrNotExist) {
		state = "running"
		if pid > 0 && !harness.Alive(pid, start) {
			// It may have written the status and exited between the read and the check.
			status.Reset()
			state, err = "gone", harness.ReadTurnFile(d, harness.StatusFile, 0, -1, &status)
		}
	}
	switch {
	case err == nil:
		state = "ended"
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	room := max(0, limit-turnPollHead-status.Len())
	var log bytes.Buffer
	if room > 0 {
		err = harness.ReadTurnFile(d, harness.RunLogFile, offset, int64(room), &log)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	out := fmt.Appendf(nil, "%s %d %d\n", state, status.Len(), room)
	out = append(out, status.Bytes()...)
	return append(out, log.Bytes()...), nil
}

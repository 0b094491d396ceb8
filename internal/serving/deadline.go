package serving

import "time"

// WriteDeadline is the write deadline of a long response (an SSE stream, an MCP response
// stream): each write must be taken within Timeout, or the client has stopped reading and the
// write fails instead of holding its writer.
type WriteDeadline struct {
	// Set sets the connection's write deadline: http.ResponseController's SetWriteDeadline, or
	// net.Conn's once the connection was taken over (which clears its deadline: a new
	// WriteDeadline then).
	Set     func(time.Time) error
	Timeout time.Duration
	at      time.Time // the deadline as Arm last set it
}

// Arm gives the next write a deadline Timeout after now, give or take a thirtieth of Timeout
// (a second of the usual 30): the deadline is moved on only once that much of it has passed, so
// that many small writes a second do not each reset the connection's timer.
func (d *WriteDeadline) Arm(now time.Time) {
	at := now.Add(d.Timeout)
	if at.Sub(d.at) > d.Timeout/30 {
		d.Set(at)
		d.at = at
	}
}

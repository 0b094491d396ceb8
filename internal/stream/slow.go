package stream

// SlowTrigger is what found a stream's client too slow. A stream ended for any of them ends
// with the one close reason a client sees, ReasonSlow; the trigger is hangar's own, counted in
// hangar_stream_slow{kind,trigger}, so that an operator tells a client that stopped reading
// from a command that outran a reading one, as nats-server keeps a slow consumer's pending
// bytes and its missed write deadline apart.
type SlowTrigger string

// The triggers, each with its own setting.
const (
	// SlowQueueFull: a Send found the stream's queue full (Config.QueueBytes) and its writer
	// had taken nothing for Config.SlowIdle. A writer that did take meanwhile is only slower
	// than the output: that ends the stream with ReasonLimit instead.
	SlowQueueFull SlowTrigger = "queue_full"
	// SlowStall: a SendWait waited for room while the writer took nothing for Config.Stall.
	SlowStall SlowTrigger = "stall"
	// SlowWriteTimeout: a write to the client missed its deadline (the transport's write
	// timeout: rest's writeTimeout, mcp's Config.WriteTimeout); the transport says so with
	// EndSlow.
	SlowWriteTimeout SlowTrigger = "write_timeout"
)

// EndSlow ends the stream now, as End(ReasonSlow) does, and records what found its client
// slow. The first reason wins; later calls do nothing.
func (s *Stream) EndSlow(t SlowTrigger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endSlowLocked(t)
}

func (s *Stream) endSlowLocked(t SlowTrigger) {
	if s.reason != "" {
		return
	}
	s.slow = t
	s.endLocked(ReasonSlow)
}

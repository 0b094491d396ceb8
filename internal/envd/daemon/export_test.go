package daemon

// ReadBuffersHeld is how many output read buffers are taken and not yet given back.
func ReadBuffersHeld() int64 { return readBufsHeld.Load() }

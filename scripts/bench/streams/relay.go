package main

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// relayFloor runs cmd through the relay (benchkit.RelayMain, started at the first run) and
// reads its output: the floor of any relay, hangar's included (bench/README.md).
func (b *bench) relayFloor(ctx context.Context, cmd string, _ time.Duration) (run, error) {
	if b.relay == nil {
		url, token, err := b.daemonAddress(ctx)
		if err != nil {
			return run{}, err
		}
		if b.relay, err = benchkit.StartRelay(ctx, nil, url, token); err != nil {
			return run{}, err
		}
	}
	r := run{start: time.Now()}
	conn, err := b.relay.Dial(ctx, cmd)
	if err != nil {
		return r, err
	}
	defer conn.Close()
	context.AfterFunc(ctx, func() { conn.Close() })
	var lr lineReader
	err = lr.readAll(conn)
	r.lines = lr.lines
	return r, err
}

// stopRelay ends the relay, if one runs.
func (b *bench) stopRelay() {
	if b.relay != nil {
		b.relay.Stop()
		b.relay = nil
	}
}

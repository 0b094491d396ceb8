package serving

import (
	"net/http"

	"golang.org/x/net/http2"
)

// H2C has srv serve h2c (HTTP/2 without TLS, with prior knowledge) beside HTTP/1.1, with a
// write scheduler that costs a frame the streams that have something to send. net/http's own
// HTTP/2 server picks the stream to write next round robin over every stream open on the
// connection, idle or not, so on a connection that holds hundreds of idle streams (attached
// processes, a client's streamed execs) every frame walks them all: at 64 streams, 4,600 of a
// line's 40,600 instructions in hangar-envd (bench/README.md). Its random scheduler keeps only
// the streams with frames waiting. Call it before srv serves.
func H2C(srv *http.Server) error {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = &p
	// x/net's server, not the one net/http carries, only for the scheduler: net/http offers
	// no way to choose one.
	//lint:ignore SA1019 net/http's HTTP/2 server has no NewWriteScheduler.
	return http2.ConfigureServer(srv, &http2.Server{NewWriteScheduler: http2.NewRandomWriteScheduler})
}

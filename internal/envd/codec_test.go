package envd

import (
	"testing"

	"google.golang.org/protobuf/proto"

	rpc "github.com/hangar-dev/hangar/internal/envd/spec/process"
)

// FuzzOutputCodec holds outputCodec's Unmarshal equal to proto.Unmarshal, for both response
// messages that carry output: the same error or none, and an equal message. The seeds are the
// daemon's output events (which take the fast path) and everything near them that must not.
func FuzzOutputCodec(f *testing.F) {
	data := func(o any) *rpc.StartResponse {
		de := &rpc.ProcessEvent_DataEvent{}
		switch o := o.(type) {
		case *rpc.ProcessEvent_DataEvent_Stdout:
			de.Output = o
		case *rpc.ProcessEvent_DataEvent_Stderr:
			de.Output = o
		case *rpc.ProcessEvent_DataEvent_Pty:
			de.Output = o
		}
		return &rpc.StartResponse{Event: &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Data{Data: de}}}
	}
	seeds := []*rpc.StartResponse{
		data(&rpc.ProcessEvent_DataEvent_Stdout{Stdout: []byte("L 1 1764750000.123456\n")}),
		data(&rpc.ProcessEvent_DataEvent_Stderr{Stderr: []byte("e\xff\x00")}),
		data(&rpc.ProcessEvent_DataEvent_Pty{Pty: []byte("\x1b[0m")}),
		data(&rpc.ProcessEvent_DataEvent_Stdout{Stdout: []byte{}}),
		data(nil),
		{Event: &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Start{Start: &rpc.ProcessEvent_StartEvent{Pid: 42}}}},
		{Event: &rpc.ProcessEvent{Event: &rpc.ProcessEvent_End{End: &rpc.ProcessEvent_EndEvent{ExitCode: 1, Exited: true, Status: "exit status 1"}}}},
		{Event: &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Keepalive{Keepalive: &rpc.ProcessEvent_KeepAlive{}}}},
		{Event: &rpc.ProcessEvent{}},
		{},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(append(b, b...))                  // every field twice: the last wins
		f.Add(append(b, 0x18, 0x01))            // an unknown field after
		f.Add(append([]byte{0x08, 0x01}, b...)) // a varint where bytes are wanted
		if len(b) > 1 {
			f.Add(b[:len(b)-1]) // cut short
		}
	}
	f.Add([]byte{0x0a, 0x04, 0x12, 0x02, 0x22, 0x00})             // data holding field 4
	f.Add([]byte{0x0a, 0x05, 0x12, 0x03, 0x0a, 0x01, 0x78, 0x00}) // a byte past the data
	f.Add([]byte{0x8a, 0x80, 0x00, 0x04, 0x12, 0x02, 0x0a, 0x00}) // a tag not minimally encoded
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, pair := range [][2]proto.Message{{&rpc.StartResponse{}, &rpc.StartResponse{}}, {&rpc.ConnectResponse{}, &rpc.ConnectResponse{}}} {
			want, got := pair[0], pair[1]
			werr := proto.Unmarshal(b, want)
			gerr := outputCodec{}.Unmarshal(b, got)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%x into %T: proto.Unmarshal says %v, outputCodec %v", b, want, werr, gerr)
			}
			if werr == nil && !proto.Equal(want, got) {
				t.Fatalf("%x into %T: proto.Unmarshal made %v, outputCodec %v", b, want, want, got)
			}
		}
	})
}

// TestOutputCodecTakesTheFastPath: each kind of output takes the fast path (FuzzOutputCodec
// holds it equal to proto.Unmarshal, which it would also be if it never took it).
func TestOutputCodecTakesTheFastPath(t *testing.T) {
	for _, o := range []*rpc.ProcessEvent_DataEvent{
		{Output: &rpc.ProcessEvent_DataEvent_Stdout{Stdout: []byte("a line\n")}},
		{Output: &rpc.ProcessEvent_DataEvent_Stderr{Stderr: []byte("an error\n")}},
		{Output: &rpc.ProcessEvent_DataEvent_Pty{Pty: []byte("\x1b[0m$ ")}},
	} {
		b, err := proto.Marshal(&rpc.ConnectResponse{Event: &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Data{Data: o}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := decodeOutput(b); !ok {
			t.Errorf("%v does not take the fast path", o)
		}
	}
}

package envd

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	rpc "github.com/hangar-dev/hangar/internal/envd/spec/process"
)

// FuzzEventDecoding decodes arbitrary bytes as a process event, in the binary and the JSON
// encoding, and checks that what the client makes of a decodable event is faithful: the kind
// matches the event, data bytes are passed on unchanged, and an end carries its exit.
func FuzzEventDecoding(f *testing.F) {
	seeds := []*rpc.ProcessEvent{
		{Event: &rpc.ProcessEvent_Start{Start: &rpc.ProcessEvent_StartEvent{Pid: 42}}},
		{Event: &rpc.ProcessEvent_Data{Data: &rpc.ProcessEvent_DataEvent{Output: &rpc.ProcessEvent_DataEvent_Stdout{Stdout: []byte("a\xff\x00")}}}},
		{Event: &rpc.ProcessEvent_Data{Data: &rpc.ProcessEvent_DataEvent{Output: &rpc.ProcessEvent_DataEvent_Stderr{Stderr: []byte("e")}}}},
		{Event: &rpc.ProcessEvent_Data{Data: &rpc.ProcessEvent_DataEvent{Output: &rpc.ProcessEvent_DataEvent_Pty{Pty: []byte("\x1b[0m")}}}},
		{Event: &rpc.ProcessEvent_Data{Data: &rpc.ProcessEvent_DataEvent{}}},
		{Event: &rpc.ProcessEvent_End{End: &rpc.ProcessEvent_EndEvent{ExitCode: -1, Status: "signal: killed", Error: proto.String("signal: killed")}}},
		{Event: &rpc.ProcessEvent_Keepalive{Keepalive: &rpc.ProcessEvent_KeepAlive{}}},
		{},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		j, err := protojson.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(j, true)
	}
	f.Add([]byte(`{"event":{"end":{"exitCode":2147483647,"exited":true}}}`), true)
	f.Add([]byte(`{"event":{"data":{"stdout":"not base64!"}}}`), true)
	f.Add([]byte{0x12, 0x7f}, false)

	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		ev := &rpc.ProcessEvent{}
		var err error
		if isJSON {
			err = protojson.Unmarshal(data, ev)
		} else {
			err = proto.Unmarshal(data, ev)
		}
		if err != nil {
			return
		}
		got, ok := eventFromProto(ev)
		switch e := ev.GetEvent().(type) {
		case nil:
			if ok {
				t.Fatalf("an empty event became %v", got.Kind)
			}
		case *rpc.ProcessEvent_Start:
			if !ok || got.Kind != EventStart || got.PID != e.Start.GetPid() {
				t.Fatalf("start %d became %+v", e.Start.GetPid(), got)
			}
		case *rpc.ProcessEvent_Data:
			var want []byte
			var kind EventKind
			switch o := e.Data.GetOutput().(type) {
			case *rpc.ProcessEvent_DataEvent_Stdout:
				want, kind = o.Stdout, EventStdout
			case *rpc.ProcessEvent_DataEvent_Stderr:
				want, kind = o.Stderr, EventStderr
			case *rpc.ProcessEvent_DataEvent_Pty:
				want, kind = o.Pty, EventPTY
			default:
				if ok {
					t.Fatalf("data without output became %v", got.Kind)
				}
				return
			}
			if !ok || got.Kind != kind || !bytes.Equal(got.Data, want) {
				t.Fatalf("%v data %q became %+v", kind, want, got)
			}
		case *rpc.ProcessEvent_End:
			if !ok || got.Kind != EventEnd || got.Exit == nil || got.Exit.Code != int(e.End.GetExitCode()) ||
				got.Exit.Exited != e.End.GetExited() || got.Exit.Status != e.End.GetStatus() || got.Exit.Error != e.End.GetError() {
				t.Fatalf("end %v became %+v", e.End, got)
			}
		case *rpc.ProcessEvent_Keepalive:
			if !ok || got.Kind != EventKeepalive {
				t.Fatalf("keepalive became %+v", got)
			}
		}
	})
}

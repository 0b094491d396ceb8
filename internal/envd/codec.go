package envd

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	rpc "github.com/hangar-dev/hangar/internal/envd/spec/process"
)

// outputCodec is connect-go's binary protobuf codec ("proto") with a fast path for the
// message a daemon sends most: a process's output, one message a line. proto.Unmarshal
// decodes ProcessEvent's two oneofs (the event, then stdout, stderr or pty) by reflection,
// about 2,300 instructions of a line hangar relays (bench/README.md); the output's shape is
// three nested length-delimited fields, read here with protowire in a few hundred. Anything
// else, or output in any other shape (a field twice, an unknown field), goes to
// proto.Unmarshal, so what comes out is always what proto.Unmarshal makes
// (FuzzOutputCodec holds the two equal).
type outputCodec struct{}

func (outputCodec) Name() string { return "proto" }

func (outputCodec) Marshal(m any) ([]byte, error) {
	pm, err := protoMessage(m)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(pm)
}

func (outputCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, err := protoMessage(m)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (outputCodec) MarshalStable(m any) ([]byte, error) {
	pm, err := protoMessage(m)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(pm)
}

func (outputCodec) IsBinary() bool { return true }

func (outputCodec) Unmarshal(b []byte, m any) error {
	switch m := m.(type) {
	case *rpc.StartResponse:
		if ev, ok := decodeOutput(b); ok {
			m.Reset()
			m.Event = ev
			return nil
		}
	case *rpc.ConnectResponse:
		if ev, ok := decodeOutput(b); ok {
			m.Reset()
			m.Event = ev
			return nil
		}
	}
	pm, err := protoMessage(m)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

func protoMessage(m any) (proto.Message, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return pm, nil
}

// decodeOutput decodes b, a StartResponse or ConnectResponse, when it is exactly a data
// event: event (1) holding data (2) holding one of stdout (1), stderr (2) or pty (3), each
// field once and nothing else. ok is false for anything else.
func decodeOutput(b []byte) (ev *rpc.ProcessEvent, ok bool) {
	event, ok := onlyBytes(b, 1)
	if !ok {
		return nil, false
	}
	data, ok := onlyBytes(event, 2)
	if !ok {
		return nil, false
	}
	num, typ, n := protowire.ConsumeTag(data)
	if n < 0 || typ != protowire.BytesType {
		return nil, false
	}
	v, m := protowire.ConsumeBytes(data[n:])
	if m < 0 || n+m != len(data) {
		return nil, false
	}
	out := bytes.Clone(v) // b is the reader's buffer, used again for the next message
	var de rpc.ProcessEvent_DataEvent
	switch num {
	case 1:
		de.Output = &rpc.ProcessEvent_DataEvent_Stdout{Stdout: out}
	case 2:
		de.Output = &rpc.ProcessEvent_DataEvent_Stderr{Stderr: out}
	case 3:
		de.Output = &rpc.ProcessEvent_DataEvent_Pty{Pty: out}
	default:
		return nil, false
	}
	return &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Data{Data: &de}}, true
}

// onlyBytes returns the value of b's one field when b is exactly field num, length-delimited.
func onlyBytes(b []byte, num protowire.Number) ([]byte, bool) {
	got, typ, n := protowire.ConsumeTag(b)
	if n < 0 || got != num || typ != protowire.BytesType {
		return nil, false
	}
	v, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil, false
	}
	return v, true
}

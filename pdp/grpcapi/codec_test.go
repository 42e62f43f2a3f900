package grpcapi

import (
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

func decodeWith(t *testing.T, c interface {
	Unmarshal(mem.BufferSlice, any) error
}, b []byte) *pb.DecideRequest {
	t.Helper()
	var req pb.DecideRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &req); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	return &req
}

// What protobuf refuses to decode becomes a marked, empty request that
// validation answers naming the field; what it decodes is untouched.
func TestCodecMarksWhatItCannotDecode(t *testing.T) {
	c := newUTF8Codec(nil)
	good, err := proto.Marshal(&pb.DecideRequest{ToolName: "Read", AgentId: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if req := decodeWith(t, c, good); req.GetToolName() != "Read" || req.GetAgentId() != "a" {
		t.Errorf("a good request decoded as %v", req)
	}
	if _, bad := markedInvalidUTF8(decodeWith(t, c, good)); bad {
		t.Error("a good request is marked")
	}

	num := (&pb.DecideRequest{}).ProtoReflect().Descriptor().Fields().ByName("tool_name").Number()
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), []byte("R\xffad"))
	req := decodeWith(t, c, badUTF8)
	if field, bad := markedInvalidUTF8(req); !bad || field != "tool_name" || req.GetToolName() != "" {
		t.Errorf("invalid UTF-8: marked %q, %v; request %v", field, bad, req)
	}

	v := structpb.NewStringValue("leaf")
	for range maxWireDepth {
		v = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"x": v}})
	}
	deep, err := proto.Marshal(&pb.DecideRequest{ToolName: "Read", Args: v.GetStructValue()})
	if err != nil {
		t.Fatal(err)
	}
	if field, bad := markedTooDeep(decodeWith(t, c, deep)); !bad || field != "args" {
		t.Errorf("too deep: marked %q, %v", field, bad)
	}
}

// A Decide request is decoded only when the gate has room for its bytes,
// and holds them until released.
func TestCodecAdmitsDecideUnderTheGate(t *testing.T) {
	gate := newByteGate(100)
	c := newUTF8Codec(gate)
	c.wait = 10 * time.Millisecond
	b, err := proto.Marshal(&pb.DecideRequest{ToolName: "Read"})
	if err != nil {
		t.Fatal(err)
	}
	first := decodeWith(t, c, b)
	if markedOverloaded(first) || gate.free != 100-int64(len(b)) {
		t.Fatalf("first request: overloaded %v, free %d", markedOverloaded(first), gate.free)
	}
	if !gate.admit(&pb.DecideRequest{}, 100-int64(len(b)), time.Second) {
		t.Fatal("the rest of the gate was not free")
	}
	if markedOverloaded(decodeWith(t, c, b)) != true {
		t.Error("a request past a full gate was decoded")
	}
	gate.release(first)
	if gate.free != int64(len(b)) {
		t.Errorf("free after release: %d", gate.free)
	}
}

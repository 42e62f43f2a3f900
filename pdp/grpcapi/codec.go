package grpcapi

import (
	"errors"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// invalidUTF8Field is the unknown-field number on which utf8Codec marks a
// request whose string field was not UTF-8; validation answers it with
// INVALID_ARGUMENT naming the field. (grpc-go reports every codec error as
// INTERNAL, which would tell the client nothing.)
const invalidUTF8Field protowire.Number = 536870911 // the largest field number

// tooDeepField marks, the same way, a request nested deeper than protobuf
// decodes (its recursion limit); validation answers it naming the field.
const tooDeepField protowire.Number = 536870910

// overloadedField marks a Decide request that found no room under the
// bytes-in-flight bound in time; validation answers RESOURCE_EXHAUSTED.
const overloadedField protowire.Number = 536870909

// utf8Codec is gRPC's proto codec, except that a message with invalid UTF-8
// in a string field, or nested too deep to decode, decodes to an empty
// message carrying the field's name. Depth is checked on the wire first:
// protobuf's decoder recurses once per level, up to 10,000, and its stack
// grows accordingly. A Decide request is decoded only once the gate has
// room for its bytes; the server's first interceptor releases them.
type utf8Codec struct {
	encoding.CodecV2
	gate *byteGate     // nil: no bound
	wait time.Duration // how long a request waits for room in the gate
}

func newUTF8Codec(gate *byteGate) utf8Codec {
	return utf8Codec{CodecV2: encoding.GetCodecV2("proto"), gate: gate, wait: inflightWait}
}

func (c utf8Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	md := m.ProtoReflect().Descriptor()
	buf := contiguous(data)
	if field := deepField(md, buf, 0); field != "" {
		mark(m, tooDeepField, field)
		return nil
	}
	if _, decide := m.(*pb.DecideRequest); decide && c.gate != nil {
		if !c.gate.admit(m, int64(len(buf)), c.wait) {
			mark(m, overloadedField, "request")
			return nil
		}
	}
	var err error
	if _, await := m.(*pb.AwaitDecisionRequest); await {
		// A waiter holds its request for up to a minute: keep nothing of
		// it but the fields it names (validation bounds those).
		err = proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(buf, m)
	} else {
		err = c.CodecV2.Unmarshal(data, v)
	}
	if err == nil {
		return nil
	}
	if c.gate != nil {
		c.gate.release(m)
	}
	field := invalidUTF8(md, buf, 0)
	if field == "" {
		return err
	}
	mark(m, invalidUTF8Field, field)
	return nil
}

// contiguous is data as one slice, copied only when it is in pieces.
func contiguous(data mem.BufferSlice) []byte {
	if len(data) == 1 {
		return data[0].ReadOnlyData()
	}
	return data.Materialize()
}

// mark empties m and records on it, as an unknown field numbered num, the
// name of the field validation will blame.
func mark(m proto.Message, num protowire.Number, field string) {
	proto.Reset(m)
	tag := protowire.AppendTag(nil, num, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendBytes(tag, []byte(field)))
}

// maxWireDepth is how deep deepField looks: deeper than any request
// validation accepts (a level of JSON is up to three messages on the wire:
// Struct, map entry, Value), far short of protobuf's own limit.
const maxWireDepth = 3*MaxArgsDepth + 8

// deepField names the top-level field of b (a message of type md) whose
// messages nest deeper than maxWireDepth; "" when none does.
func deepField(md protoreflect.MessageDescriptor, b []byte, depth int) string {
	if depth > maxWireDepth {
		return "?"
	}
	found := ""
	eachMessageField(md, b, func(fd protoreflect.FieldDescriptor, payload []byte) bool {
		if fd.Kind() == protoreflect.MessageKind && deepField(fd.Message(), payload, depth+1) != "" {
			found = string(fd.Name())
		}
		return found == ""
	})
	return found
}

// eachMessageField calls f with each length-delimited field of b (a message
// of type md) that md declares, and its payload, until f returns false; it
// stops at the first malformed byte.
func eachMessageField(md protoreflect.MessageDescriptor, b []byte, f func(protoreflect.FieldDescriptor, []byte) bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return
		}
		val := b[:n]
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			continue
		}
		payload, _ := protowire.ConsumeBytes(val)
		if !f(fd, payload) {
			return
		}
	}
}

// invalidUTF8 names the first string field of b (a message of type md) that
// is not UTF-8, as a dotted path; "" when there is none.
func invalidUTF8(md protoreflect.MessageDescriptor, b []byte, depth int) string {
	if depth > 64 {
		return ""
	}
	found := ""
	eachMessageField(md, b, func(fd protoreflect.FieldDescriptor, payload []byte) bool {
		switch {
		case fd.Kind() == protoreflect.StringKind && !utf8.Valid(payload):
			found = string(fd.Name())
		case fd.Kind() == protoreflect.MessageKind:
			if inner := invalidUTF8(fd.Message(), payload, depth+1); inner != "" {
				found = string(fd.Name()) + "." + inner
			}
		}
		return found == ""
	})
	return found
}

// markedInvalidUTF8 returns the field utf8Codec marked on m as not UTF-8.
func markedInvalidUTF8(m proto.Message) (string, bool) { return marked(m, invalidUTF8Field) }

// markedTooDeep returns the field utf8Codec marked on m as nested too deep.
func markedTooDeep(m proto.Message) (string, bool) { return marked(m, tooDeepField) }

// markedOverloaded reports whether utf8Codec found no room for m in time.
func markedOverloaded(m proto.Message) bool { _, ok := marked(m, overloadedField); return ok }

func marked(m proto.Message, mark protowire.Number) (string, bool) {
	b := m.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		if num == mark && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", false
			}
			return string(v), true
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return "", false
		}
		b = b[n:]
	}
	return "", false
}

var errInvalidUTF8 = errors.New("is not valid UTF-8")

package pdp

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// invalidUTF8Field is the unknown-field number on which utf8Codec marks a
// request whose string field was not UTF-8; validation answers it with
// INVALID_ARGUMENT naming the field. (grpc-go reports every codec error as
// INTERNAL, which would tell the client nothing.)
const invalidUTF8Field protowire.Number = 536870911 // the largest field number

// utf8Codec is gRPC's proto codec, except that a message with invalid UTF-8
// in a string field decodes to an empty message carrying the field's name.
type utf8Codec struct{ encoding.CodecV2 }

func newUTF8Codec() encoding.CodecV2 { return utf8Codec{encoding.GetCodecV2("proto")} }

func (c utf8Codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	buf := data.Materialize()
	field := invalidUTF8(m.ProtoReflect().Descriptor(), buf, 0)
	if field == "" {
		return err
	}
	proto.Reset(m)
	mark := protowire.AppendTag(nil, invalidUTF8Field, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendBytes(mark, []byte(field)))
	return nil
}

// invalidUTF8 names the first string field of b (a message of type md) that
// is not UTF-8, as a dotted path; "" when there is none.
func invalidUTF8(md protoreflect.MessageDescriptor, b []byte, depth int) string {
	if depth > 64 {
		return ""
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return ""
		}
		val := b[:n]
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			continue
		}
		payload, _ := protowire.ConsumeBytes(val)
		switch {
		case fd.Kind() == protoreflect.StringKind && !utf8.Valid(payload):
			return string(fd.Name())
		case fd.Kind() == protoreflect.MessageKind:
			if inner := invalidUTF8(fd.Message(), payload, depth+1); inner != "" {
				return string(fd.Name()) + "." + inner
			}
		}
	}
	return ""
}

// markedInvalidUTF8 returns the field utf8Codec marked on m, if any.
func markedInvalidUTF8(m proto.Message) (string, bool) {
	b := m.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		if num == invalidUTF8Field && typ == protowire.BytesType {
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

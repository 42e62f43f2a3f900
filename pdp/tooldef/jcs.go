// Package tooldef names an MCP tool's definition by a digest: the SHA-256
// of the RFC 8785 (JSON Canonicalization Scheme) form of the fields that
// tell a model what the tool is — name, title, description, inputSchema,
// outputSchema and annotations. Two servers that describe a tool alike, in
// any key order, spacing or number spelling, give one digest; a word
// changed anywhere in it gives another. A gateway keeps the digest a
// person trusted and notices when a server changes what it says.
package tooldef

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// No well-kept Go module implements RFC 8785 among the dependencies, and
// the scheme is small: the parser below reads I-JSON strictly (a duplicate
// key, invalid UTF-8 or a lone surrogate is an error, as RFC 8785 requires
// of its input) and the writer sorts keys by UTF-16 code units and writes
// numbers as ECMAScript's Number.prototype.toString does.

// maxDepth bounds nesting: a definition is a server's claim, and a
// hostile one must not exhaust the stack.
const maxDepth = 128

// Canonical is the RFC 8785 canonical form of the JSON text in.
func Canonical(in []byte) ([]byte, error) {
	v, err := Parse(in)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := write(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Parse reads one JSON value strictly: objects are map[string]any, arrays
// []any, numbers float64 (a number beyond float64's range is an error),
// strings, booleans and nil.
func Parse(in []byte) (any, error) {
	p := &parser{in: in}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.in) {
		return nil, p.errorf("data after the JSON value")
	}
	return v, nil
}

type parser struct {
	in []byte
	i  int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *parser) space() {
	for p.i < len(p.in) {
		switch p.in[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.errorf("nested deeper than %d", maxDepth)
	}
	if p.i >= len(p.in) {
		return nil, p.errorf("unexpected end")
	}
	switch c := p.in[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	case p.literal("null"):
		return nil, nil
	}
	return nil, p.errorf("unexpected character %q", p.in[p.i])
}

func (p *parser) literal(word string) bool {
	if bytes.HasPrefix(p.in[p.i:], []byte(word)) {
		p.i += len(word)
		return true
	}
	return false
}

func (p *parser) object(depth int) (any, error) {
	p.i++ // {
	out := map[string]any{}
	p.space()
	if p.i < len(p.in) && p.in[p.i] == '}' {
		p.i++
		return out, nil
	}
	for {
		p.space()
		if p.i >= len(p.in) || p.in[p.i] != '"' {
			return nil, p.errorf("expected a key")
		}
		at := p.i
		k, err := p.string()
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			p.i = at
			return nil, p.errorf("duplicate key %q", k)
		}
		p.space()
		if p.i >= len(p.in) || p.in[p.i] != ':' {
			return nil, p.errorf("expected ':'")
		}
		p.i++
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out[k] = v
		p.space()
		if p.i >= len(p.in) {
			return nil, p.errorf("unexpected end in an object")
		}
		switch p.in[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return out, nil
		default:
			return nil, p.errorf("expected ',' or '}'")
		}
	}
}

func (p *parser) array(depth int) (any, error) {
	p.i++ // [
	out := []any{}
	p.space()
	if p.i < len(p.in) && p.in[p.i] == ']' {
		p.i++
		return out, nil
	}
	for {
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.space()
		if p.i >= len(p.in) {
			return nil, p.errorf("unexpected end in an array")
		}
		switch p.in[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return out, nil
		default:
			return nil, p.errorf("expected ',' or ']'")
		}
	}
}

func (p *parser) string() (string, error) {
	p.i++ // "
	var b strings.Builder
	for {
		if p.i >= len(p.in) {
			return "", p.errorf("unterminated string")
		}
		c := p.in[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), nil
		case c < 0x20:
			return "", p.errorf("control character %#x in a string", c)
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			p.i++
		default:
			r, n := utf8.DecodeRune(p.in[p.i:])
			if r == utf8.RuneError && n <= 1 {
				return "", p.errorf("invalid UTF-8")
			}
			b.WriteRune(r)
			p.i += n
		}
	}
}

func (p *parser) escape(b *strings.Builder) error {
	if p.i+1 >= len(p.in) {
		return p.errorf("unterminated escape")
	}
	c := p.in[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		b.WriteByte(c)
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'u':
		r, err := p.hex4()
		if err != nil {
			return err
		}
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00:
			if !bytes.HasPrefix(p.in[p.i:], []byte(`\u`)) {
				return p.errorf("a lone surrogate \\u%04x", r)
			}
			p.i += 2
			r2, err := p.hex4()
			if err != nil {
				return err
			}
			if r2 < 0xdc00 || r2 > 0xdfff {
				return p.errorf("a lone surrogate \\u%04x", r)
			}
			r = utf16.DecodeRune(r, r2)
		case utf16.IsSurrogate(r):
			return p.errorf("a lone surrogate \\u%04x", r)
		}
		b.WriteRune(r)
	default:
		return p.errorf("unknown escape \\%c", c)
	}
	return nil
}

func (p *parser) hex4() (rune, error) {
	if p.i+4 > len(p.in) {
		return 0, p.errorf("short \\u escape")
	}
	n, err := strconv.ParseUint(string(p.in[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, p.errorf("bad \\u escape %q", p.in[p.i:p.i+4])
	}
	p.i += 4
	return rune(n), nil
}

func (p *parser) number() (any, error) {
	start := p.i
	if p.in[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.in) && p.in[p.i] >= '0' && p.in[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if n := digits(); n == 0 {
		return nil, p.errorf("a number without digits")
	} else if n > 1 && p.in[intStart] == '0' {
		return nil, p.errorf("a number with a leading zero")
	}
	if p.i < len(p.in) && p.in[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.errorf("a number without digits after '.'")
		}
	}
	if p.i < len(p.in) && (p.in[p.i] == 'e' || p.in[p.i] == 'E') {
		p.i++
		if p.i < len(p.in) && (p.in[p.i] == '+' || p.in[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.errorf("a number without digits in its exponent")
		}
	}
	f, err := strconv.ParseFloat(string(p.in[start:p.i]), 64)
	if err != nil {
		return nil, fmt.Errorf("JSON at byte %d: the number %s is beyond the range of an IEEE 754 double", start, p.in[start:p.i])
	}
	return f, nil
}

func write(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case float64:
		s, err := Number(v)
		if err != nil {
			return err
		}
		b.WriteString(s)
	case string:
		writeString(b, v)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := write(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sortUTF16(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := write(b, v[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("%T is not a JSON value", v)
	}
	return nil
}

// sortUTF16 orders keys by their UTF-16 code units, as RFC 8785 does
// (ECMAScript's string order): above the BMP this differs from the order
// of code points, and so of UTF-8 bytes.
func sortUTF16(keys []string) {
	units := make(map[string][]uint16, len(keys))
	for _, k := range keys {
		units[k] = utf16.Encode([]rune(k))
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := units[keys[i]], units[keys[j]]
		for n := 0; n < len(a) && n < len(b); n++ {
			if a[n] != b[n] {
				return a[n] < b[n]
			}
		}
		return len(a) < len(b)
	})
}

// writeString escapes what RFC 8785 escapes — the quote, the backslash and
// the controls below U+0020, with the short forms where JSON has them —
// and writes everything else as itself, in UTF-8.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// Number is f as ECMAScript's Number.prototype.toString writes it (the
// shortest digits that read back as f; plain notation from 1e-6 up to
// 1e21, exponent notation outside), which RFC 8785 prescribes. NaN and the
// infinities are not JSON.
func Number(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", errors.New("NaN and Infinity are not JSON numbers")
	}
	if f == 0 {
		return "0", nil // -0 too
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	k, n := len(digits), e+1 // f = 0.digits × 10^n
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		es := "+"
		if n-1 < 0 {
			es = "-"
		}
		x := n - 1
		if x < 0 {
			x = -x
		}
		out = digits[:1]
		if k > 1 {
			out += "." + digits[1:]
		}
		out += "e" + es + strconv.Itoa(x)
	}
	return sign + out, nil
}

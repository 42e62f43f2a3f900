// Package strictjson reads JSON that an agent can shape, in the one way
// every reader downstream agrees on. encoding/json matches object keys
// ignoring case and lets the last duplicate win, while other readers (an
// MCP server in Node, a policy in Rego) take the first or match exactly:
// a body with both "name" and "NAME" is then one thing to the reader that
// decides and another to the one that acts. So an object whose keys are
// equal, or equal under Unicode case folding, is refused, naming the key;
// so is text that is not UTF-8, a \u escape of a lone surrogate (which
// readers replace or keep differently), and data after the value. Numbers
// are kept as written (json.Number), so re-encoding never rounds them.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds nesting: deeper input is refused rather than recursed
// into without bound.
const MaxDepth = 1000

// Error is a refusal: Path is where in the value it is ("" for the whole
// text, else keys joined with dots and array indexes in brackets, as in
// `params.arguments.NAME` or `steps[2].request`), Reason what is wrong.
type Error struct {
	Path   string
	Reason string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// Check reports whether data is one strict JSON value; callers then decode
// it with encoding/json as before, knowing no reader can see it otherwise.
func Check(data []byte) error {
	_, err := read(data, false)
	return err
}

// Decode reads data as exactly one JSON value, strictly. Objects are
// map[string]any, arrays []any, numbers json.Number (as written), and
// strings, booleans and null string, bool and nil.
func Decode(data []byte) (any, error) {
	return read(data, true)
}

// A reader reads one value; keep is whether it builds the value (Decode)
// or only checks it (Check, which then costs no more than the keys of one
// object at a time).
type reader struct {
	dec  *json.Decoder
	keep bool
}

func read(data []byte, keep bool) (any, error) {
	if !utf8.Valid(data) {
		return nil, &Error{Reason: fmt.Sprintf("not valid UTF-8 (at byte %d)", invalidAt(data))}
	}
	if err := checkEscapes(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	rd := &reader{dec: dec, keep: keep}
	v, err := rd.value("", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Reason: "data after the JSON value"}
	}
	return v, nil
}

func (rd *reader) value(path string, depth int) (any, error) {
	tok, err := rd.dec.Token()
	if err != nil {
		return nil, notJSON(path, err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	if depth >= MaxDepth {
		return nil, &Error{Path: path, Reason: fmt.Sprintf("nested deeper than %d", MaxDepth)}
	}
	switch d {
	case '{':
		return rd.object(path, depth)
	case '[':
		var arr []any
		for i := 0; rd.dec.More(); i++ {
			v, err := rd.value(fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			if rd.keep {
				arr = append(arr, v)
			}
		}
		if arr == nil && rd.keep {
			arr = []any{}
		}
		return arr, closing(rd.dec, path)
	}
	return nil, &Error{Path: path, Reason: fmt.Sprintf("not JSON: unexpected %q", d)}
}

func (rd *reader) object(path string, depth int) (any, error) {
	var obj map[string]any
	if rd.keep {
		obj = map[string]any{}
	}
	seen := map[string]string{} // folded key → the key as written
	for rd.dec.More() {
		tok, err := rd.dec.Token()
		if err != nil {
			return nil, notJSON(path, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, &Error{Path: path, Reason: "not JSON: an object key that is not a string"}
		}
		at := Join(path, key)
		f := Fold(key)
		if prev, dup := seen[f]; dup {
			if prev == key {
				return nil, &Error{Path: at, Reason: fmt.Sprintf("the key %q appears twice", key)}
			}
			return nil, &Error{Path: at, Reason: fmt.Sprintf("the key %q equals the key %q ignoring case", key, prev)}
		}
		seen[f] = key
		v, err := rd.value(at, depth+1)
		if err != nil {
			return nil, err
		}
		if rd.keep {
			obj[key] = v
		}
	}
	if !rd.keep {
		return nil, closing(rd.dec, path)
	}
	return obj, closing(rd.dec, path)
}

func closing(dec *json.Decoder, path string) error {
	if _, err := dec.Token(); err != nil {
		return notJSON(path, err)
	}
	return nil
}

func notJSON(path string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return &Error{Path: path, Reason: "not JSON: " + err.Error()}
}

// Join is the path of key inside the value at path. A key that is not a
// plain word is quoted, so a key holding a dot cannot pass for two.
func Join(path, key string) string {
	if !plainKey(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r == '-' || r == '$' || r == '/' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// Fold maps s to one representative of the strings strings.EqualFold
// holds equal to it: each rune becomes the smallest rune of its simple
// case-folding orbit (k, K and the Kelvin sign all become K).
func Fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		least := r
		for c := unicode.SimpleFold(r); c != r; c = unicode.SimpleFold(c) {
			if c < least {
				least = c
			}
		}
		b.WriteRune(least)
	}
	return b.String()
}

func invalidAt(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}

// checkEscapes refuses a \u escape of a UTF-16 surrogate that is not half
// of a pair: encoding/json turns it into U+FFFD, other readers keep it.
func checkEscapes(data []byte) error {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(data) || data[i+1] != 'u' {
				i++ // the escaped character
				continue
			}
			r, ok := hex4(data, i+2)
			if !ok {
				return nil // malformed; the decoder says so
			}
			if utf16.IsSurrogate(r) {
				low, ok := rune(0), false
				if r < 0xDC00 && i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
					low, ok = hex4(data, i+8)
				}
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return &Error{Reason: fmt.Sprintf("a \\u escape of a lone UTF-16 surrogate (%q at byte %d) is not a character", data[i:i+6], i)}
				}
				i += 6
			}
			i += 5
		}
	}
	return nil
}

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// Package askview renders an ask for the person who answers it: the
// whole call, every character shown as what it is, bounded, with the
// values the decision log masks marked as secret. Every approver surface
// (ListPending, the CLI, the console, notifications) shows what it makes.
package askview

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// hidden reports whether r would not show as itself on a terminal or a
// page: controls (ANSI escapes start with one), format characters
// (bidirectional overrides and isolates, zero-width spaces and joiners,
// the byte-order mark, tag characters), line and paragraph separators,
// private-use and unassigned code points, blanks other than a space,
// variation selectors and the fillers that render as nothing.
func hidden(r rune) bool {
	switch {
	case r == ' ':
		return false
	case r == utf8.RuneError, !unicode.IsGraphic(r), unicode.IsSpace(r), unicode.Is(unicode.Zs, r),
		unicode.Is(unicode.Variation_Selector, r), unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
		return true
	}
	switch r {
	case '\u034f', '\u115f', '\u1160', '\u17b4', '\u17b5', '\u180e', '\u2800', '\u3164', '\uffa0':
		return true // combining grapheme joiner, Hangul and Khmer fillers, Mongolian vowel separator, braille blank
	}
	return false
}

// Visible is s with every hidden character written as a \uXXXX escape
// (\U00XXXXXX above the BMP) and every backslash doubled, so that an
// escape a caller typed cannot pass for one toolpdp wrote.
func Visible(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case hidden(r):
			writeEscape(&b, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsEscape(s string) bool {
	for _, r := range s {
		if r == '\\' || hidden(r) {
			return true
		}
	}
	return false
}

func writeEscape(b *strings.Builder, r rune) {
	if r > 0xffff {
		fmt.Fprintf(b, `\U%08X`, r)
		return
	}
	fmt.Fprintf(b, `\u%04X`, r)
}

// quote is s as a JSON string in which every hidden character is an
// escape: valid JSON that reads back to s, and shows what s holds.
func quote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case hidden(r) && r > 0xffff: // JSON escapes a pair of surrogates
			r1, r2 := utf16Pair(r)
			fmt.Fprintf(b, `\u%04X\u%04X`, r1, r2)
		case hidden(r):
			fmt.Fprintf(b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// JSON renders a decoded JSON value with keys sorted and two-space
// indentation, every string quoted by quote.
func JSON(v any) string {
	var b strings.Builder
	writeJSON(&b, v, "")
	return b.String()
}

func writeJSON(b *strings.Builder, v any, indent string) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		quote(b, t)
	case map[string]any:
		if len(t) == 0 {
			b.WriteString("{}")
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("{\n")
		for i, k := range keys {
			b.WriteString(indent + "  ")
			quote(b, k)
			b.WriteString(": ")
			writeJSON(b, t[k], indent+"  ")
			if i < len(keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	case []any:
		if len(t) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, x := range t {
			b.WriteString(indent + "  ")
			writeJSON(b, x, indent+"  ")
			if i < len(t)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	default: // numbers and booleans
		raw, err := json.Marshal(t)
		if err != nil {
			raw = []byte(`"` + Visible(fmt.Sprint(t)) + `"`)
		}
		b.Write(raw)
	}
}

// Cut is s cut to at most n bytes on a character boundary, and whether it
// was cut.
func Cut(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

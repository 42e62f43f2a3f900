package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// definitionColumn is the width of each side of a changed tool definition.
const definitionColumn = 60

// printDefinitionChange shows an ask about a changed MCP tool definition:
// the kept and the new definition side by side, a line that differs marked
// with '!', long lines wrapped within their column.
func printDefinitionChange(w io.Writer, c *pb.ToolDefinitionChange) {
	fmt.Fprintf(w, "  the definition of tool %s on server %s changed; allow keeps the new one:\n", c.Tool, c.Server)
	fmt.Fprintf(w, "    kept: %s\n    new:  %s\n", c.KeptDigest, c.NewDigest)
	kept, now := strings.Split(c.KeptDefinition, "\n"), strings.Split(c.NewDefinition, "\n")
	fmt.Fprintf(w, "    %-*s | %s\n", definitionColumn+2, "  kept", "new")
	for i := range max(len(kept), len(now)) {
		var l, r string
		if i < len(kept) {
			l = kept[i]
		}
		if i < len(now) {
			r = now[i]
		}
		mark := " "
		if i >= len(kept) || i >= len(now) || l != r {
			mark = "!"
		}
		ls, rs := wrap(l, definitionColumn), wrap(r, definitionColumn)
		for j := range max(len(ls), len(rs)) {
			var a, b string
			if j < len(ls) {
				a = ls[j]
			}
			if j < len(rs) {
				b = rs[j]
			}
			fmt.Fprintf(w, "    %s %s%s | %s\n", mark, a, strings.Repeat(" ", definitionColumn-utf8.RuneCountInString(a)), b)
			mark = " "
		}
	}
}

// wrap cuts s into pieces of at most n characters (one empty piece for "").
func wrap(s string, n int) []string {
	var out []string
	for utf8.RuneCountInString(s) > n {
		i, k := 0, 0
		for k < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			k++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

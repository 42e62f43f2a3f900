// Package clip cuts text to a byte bound without splitting a character:
// what toolpdp quotes back to models, people and logs stays valid UTF-8.
package clip

import "unicode/utf8"

// Head is s cut to at most n bytes, on a character boundary.
func Head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Middle is s cut to at most n bytes by dropping its middle, marked " … ":
// a message's end often says what to do ("do not run it"), so it is kept.
func Middle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = " … "
	head := max((n-len(ellipsis))*2/3, 0)
	tail := max(n-len(ellipsis)-head, 0)
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return Head(s, head) + ellipsis + s[start:]
}

package envguard

import "strings"

// sedRunsCommand reports whether a sed script may run a shell command: GNU
// sed's e command (`1e curl x`) or the e flag of s (`s/x/curl/e`). It reads
// the script command by command; what it cannot read counts as running one
// (wider is safe).
func sedRunsCommand(s string) bool {
	p := sedScanner{s: s}
	for {
		p.skip(" \t\n;")
		if p.done() {
			return false
		}
		if !p.address() {
			return true
		}
		p.skip(" \t")
		for !p.done() && p.peek() == '!' {
			p.i++
			p.skip(" \t")
		}
		if p.done() {
			return true
		}
		c := p.next()
		switch c {
		case 'e':
			return true
		case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case '#', 'a', 'i', 'c', 'r', 'R', 'w', 'W':
			p.line()
		case ':', 'b', 't', 'T':
			p.label()
		case 'q', 'Q', 'l', 'L':
			p.skip(" \t0123456789")
		case 'v':
			p.label()
		case 's':
			if !p.delimited(2) {
				return true
			}
			for !p.done() {
				f := p.peek()
				if f == 'e' {
					return true
				}
				if f == 'w' || f == 'W' {
					p.line()
					break
				}
				if !(f >= '0' && f <= '9' || strings.IndexByte("gpiImM", f) >= 0) {
					break
				}
				p.i++
			}
		case 'y':
			if !p.delimited(2) {
				return true
			}
		default:
			return true
		}
	}
}

type sedScanner struct {
	s string
	i int
}

func (p *sedScanner) done() bool { return p.i >= len(p.s) }
func (p *sedScanner) peek() byte { return p.s[p.i] }
func (p *sedScanner) next() byte { c := p.s[p.i]; p.i++; return c }

func (p *sedScanner) skip(set string) {
	for !p.done() && strings.IndexByte(set, p.peek()) >= 0 {
		p.i++
	}
}

// line skips to the end of the line; a backslash-newline continues it.
func (p *sedScanner) line() {
	for !p.done() {
		c := p.next()
		if c == '\\' && !p.done() {
			p.i++
			continue
		}
		if c == '\n' {
			return
		}
	}
}

// label skips a label, which ends at a newline or a semicolon.
func (p *sedScanner) label() {
	for !p.done() && p.peek() != '\n' && p.peek() != ';' {
		p.i++
	}
}

// address reads an optional address or range: N, $, /re/, \cREc, N~M, and
// ,N / ,+N / ,~N after it. It reports false when it cannot read one.
func (p *sedScanner) address() bool {
	for n := 0; n < 2; n++ {
		if p.done() {
			return true
		}
		switch c := p.peek(); {
		case c >= '0' && c <= '9' || c == '+' || c == '~':
			p.skip("+~0123456789")
		case c == '$':
			p.i++
		case c == '/':
			if !p.delimited(1) {
				return false
			}
			p.skip("IM")
		case c == '\\':
			p.i++
			if !p.delimited(1) {
				return false
			}
			p.skip("IM")
		}
		p.skip(" \t")
		if n == 0 && !p.done() && p.peek() == ',' {
			p.i++
			p.skip(" \t")
			continue
		}
		return true
	}
	return true
}

// delimited reads parts sections ended by the delimiter at the cursor
// (s/a/b/ has 2 after the first /), with backslash escapes.
func (p *sedScanner) delimited(parts int) bool {
	if p.done() {
		return false
	}
	d := p.next()
	if d == '\n' || d == '\\' {
		return false
	}
	for k := 0; k < parts; k++ {
		for {
			if p.done() {
				return false
			}
			c := p.next()
			if c == '\\' {
				if p.done() {
					return false
				}
				p.i++
				continue
			}
			if c == d {
				break
			}
		}
	}
	return true
}

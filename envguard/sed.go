package envguard

import (
	"regexp"
	"strings"
)

// sedRunsCommand reports whether a sed script may run a shell command: GNU
// sed's e command (`1e curl x`) or the e flag of s (`s/x/curl/e`). It reads
// the script command by command; what it cannot read counts as running one
// (wider is safe).
func sedRunsCommand(s string) bool {
	runs, _ := sedScript(s)
	return runs
}

// langFile is a file a program's own language names: sed's r and w, awk's
// getline < and print >.
type langFile struct {
	name  string
	write bool
}

// sedScript reads a sed script: whether it may run a command, and the
// files its r, R, w and W commands and s///w flag read or write.
func sedScript(s string) (runs bool, files []langFile) {
	p := sedScanner{s: s}
	for {
		p.skip(" \t\n;")
		if p.done() {
			return false, files
		}
		if !p.address() {
			return true, files
		}
		p.skip(" \t")
		for !p.done() && p.peek() == '!' {
			p.i++
			p.skip(" \t")
		}
		if p.done() {
			return true, files
		}
		c := p.next()
		switch c {
		case 'e':
			return true, files
		case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'r', 'R', 'w', 'W':
			files = append(files, langFile{name: p.fileName(), write: c == 'w' || c == 'W'})
		case '#', 'a', 'i', 'c':
			p.line()
		case ':', 'b', 't', 'T':
			p.label()
		case 'q', 'Q', 'l', 'L':
			p.skip(" \t0123456789")
		case 'v':
			p.label()
		case 's':
			if !p.delimited(2) {
				return true, files
			}
			for !p.done() {
				f := p.peek()
				if f == 'e' {
					return true, files
				}
				if f == 'w' || f == 'W' {
					p.i++
					files = append(files, langFile{name: p.fileName(), write: true})
					break
				}
				if !(f >= '0' && f <= '9' || strings.IndexByte("gpiImM", f) >= 0) {
					break
				}
				p.i++
			}
		case 'y':
			if !p.delimited(2) {
				return true, files
			}
		default:
			return true, files
		}
	}
}

// fileName reads the file name of r, R, w, W or s///w: after blanks, to
// the end of the line.
func (p *sedScanner) fileName() string {
	p.skip(" \t")
	start := p.i
	for !p.done() && p.peek() != '\n' {
		p.i++
	}
	return p.s[start:p.i]
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

// awkFiles finds the files an awk program opens by name: getline < FILE
// reads, print and printf > or >> FILE write. A target that is not a
// string literal is returned with an empty name (known only at run time),
// as is a program assigning ARGV or ARGC, which choose the files it reads.
func awkFiles(prog string) []langFile {
	var files []langFile
	if awkArgv.MatchString(prog) {
		files = append(files, langFile{})
	}
	i := 0
	n := len(prog)
	skipString := func(j int) int { // j at the opening quote; returns the index after the closing one
		for j++; j < n; j++ {
			switch prog[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return n
	}
	target := func(j int) (string, int) { // the expression after < or >
		for j < n && (prog[j] == ' ' || prog[j] == '\t') {
			j++
		}
		if j < n && prog[j] == '"' {
			end := skipString(j)
			lit := prog[j+1 : max(end-1, j+1)]
			k := end
			for k < n && (prog[k] == ' ' || prog[k] == '\t') {
				k++
			}
			if k < n && !strings.ContainsRune(";}\n)|", rune(prog[k])) {
				return "", end // "x" "y" or "x" y: concatenated with more
			}
			if strings.ContainsRune(lit, '\\') {
				return "", end
			}
			return lit, end
		}
		return "", j
	}
	for i < n {
		c := prog[i]
		switch {
		case c == '"':
			i = skipString(i)
			continue
		case c == '#':
			for i < n && prog[i] != '\n' {
				i++
			}
			continue
		case isAwkWordStart(c) && (i == 0 || !isAwkWord(prog[i-1])):
			j := i
			for j < n && isAwkWord(prog[j]) {
				j++
			}
			switch prog[i:j] {
			case "getline":
				k := j
				for k < n && (prog[k] == ' ' || prog[k] == '\t') {
					k++
				}
				for k < n && (isAwkWord(prog[k]) || prog[k] == '$') {
					k++ // getline VAR
				}
				for k < n && (prog[k] == ' ' || prog[k] == '\t') {
					k++
				}
				if k < n && prog[k] == '<' {
					name, end := target(k + 1)
					files = append(files, langFile{name: name})
					j = end
				}
			case "print", "printf":
				depth := 0
				k := j
			statement:
				for k < n {
					switch prog[k] {
					case '"':
						k = skipString(k)
						continue
					case '(', '[':
						depth++
					case ')', ']':
						depth--
					case ';', '\n', '}':
						if depth <= 0 {
							break statement
						}
					case '>':
						if depth <= 0 {
							k++
							if k < n && prog[k] == '>' {
								k++
							}
							name, end := target(k)
							files = append(files, langFile{name: name, write: true})
							k = end
							break statement
						}
					}
					k++
				}
				j = k
			}
			i = j
			continue
		}
		i++
	}
	return files
}

var awkArgv = regexp.MustCompile(`\bARG[VC]\b`)

func isAwkWordStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isAwkWord(c byte) bool { return isAwkWordStart(c) || c >= '0' && c <= '9' }

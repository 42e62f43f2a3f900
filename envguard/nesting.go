package envguard

import "fmt"

// Bounds on how deeply a command nests, checked by CheckNesting before it
// is parsed: the parser recurses once per level (a bracket, a compound
// command, an operator of a chain), and a 64 KB command of nothing but
// levels grows its stack past 250 MB.
const (
	MaxNesting  = 64   // open brackets and compound commands at once
	MaxChaining = 1024 // operators of and-or lists, pipelines and arithmetic
)

// CheckNesting reports, as an ErrUncheckable error, a command that nests
// deeper than MaxNesting or chains more than MaxChaining operators. It reads
// the text without parsing it and ignores quoting, so the scripts of nested
// `sh -c '…'` strings count too; it errs toward refusing, never toward
// letting a deep command reach the parser.
func CheckNesting(cmd string) error {
	var kinds []byte // open levels: '(' '{' '[' 'k' (keyword), 'a' (arithmetic)
	chained := 0
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == '(' || c == '{' || c == '[':
			kind := c
			if c == '[' || (c == '(' && i > 0 && cmd[i-1] == '(') {
				kind = 'a'
			}
			if kinds = append(kinds, kind); len(kinds) > MaxNesting {
				return fmt.Errorf("%w: nested deeper than %d levels", ErrUncheckable, MaxNesting)
			}
		case c == ')' || c == '}' || c == ']':
			if len(kinds) > 0 {
				kinds = kinds[:len(kinds)-1]
			}
		case c == '|' || (c == '&' && i+1 < len(cmd) && cmd[i+1] == '&'):
			chained++
			if i+1 < len(cmd) && cmd[i+1] == c {
				i++
			}
		case isArithOp(c) && len(kinds) > 0 && kinds[len(kinds)-1] == 'a':
			chained++
		case isWordByte(c) && (i == 0 || !isWordByte(cmd[i-1])):
			j := i
			for j < len(cmd) && isWordByte(cmd[j]) {
				j++
			}
			switch cmd[i:j] {
			case "if", "while", "until", "for", "case", "select":
				if kinds = append(kinds, 'k'); len(kinds) > MaxNesting {
					return fmt.Errorf("%w: nested deeper than %d levels", ErrUncheckable, MaxNesting)
				}
			case "fi", "done", "esac":
				if len(kinds) > 0 {
					kinds = kinds[:len(kinds)-1]
				}
			}
			i = j - 1
		}
		if chained > MaxChaining {
			return fmt.Errorf("%w: more than %d chained operators", ErrUncheckable, MaxChaining)
		}
	}
	return nil
}

func isArithOp(c byte) bool {
	switch c {
	case '+', '-', '*', '/', '%', '<', '>', '^', ',', '?', ':', '=', '!', '~', '&':
		return true
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

package envguard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// SecretArg is one way a program takes a secret on its command line, so
// that whatever shows the command to people (a decision log, an ask) can
// mask the value and keep the rest readable.
type SecretArg struct {
	// Subcommand are words that must all appear, in order, among the
	// program's words for the entry to apply (docker login -p; docker run
	// -p is a port).
	Subcommand []string `json:"subcommand,omitempty"`
	// Option is the option whose value is secret: "-p" takes a value
	// attached (-pX) or the next word, "--password" "--password=X" or the
	// next word.
	Option string `json:"option,omitempty"`
	// Attached: only a value attached to the option is a value (mysql -pX;
	// mysql -p alone prompts and the next word is the database).
	Attached bool `json:"attached_only,omitempty"`
	// After: only the part of the value after this separator is secret
	// (curl -u user:PASSWORD, smbclient -U user%PASSWORD); a value
	// without it holds none.
	After string `json:"after,omitempty"`
	// Prefix: only a value starting with it holds a secret, the part after
	// it (openssl -passin pass:X; env:VAR and file:PATH are not secrets).
	Prefix string `json:"prefix,omitempty"`
	// OperandAfterName: the operand after an operand that names a secret
	// (aws configure set aws_secret_access_key VALUE, git config
	// user.password VALUE) — a name the caller's predicate calls secret, or
	// one starting with one of Names.
	OperandAfterName bool     `json:"operand_after_name,omitempty"`
	Names            []string `json:"names,omitempty"`
	// LastOperandWith: with this short option among the options (alone or
	// grouped, htpasswd -bc), the last operand is secret.
	LastOperandWith string `json:"last_operand_with,omitempty"`
	// LastOperand: the last operand is secret (rabbitmqctl add_user USER
	// PASSWORD, with its subcommand).
	LastOperand bool `json:"last_operand,omitempty"`
	// FirstOperand: the first operand holds the secret (with After, the
	// part after it: sqlplus user/PASSWORD@db).
	FirstOperand bool `json:"first_operand,omitempty"`
}

// WithSecretArguments is a copy of t whose secret_arguments are these,
// sharing t's compiled tables.
func (t *Tables) WithSecretArguments(args map[string][]SecretArg) *Tables {
	c := *t
	c.SecretArguments = args
	return &c
}

// ValidateSecretArguments checks the secret_arguments entries.
func (t *Tables) ValidateSecretArguments() error {
	for _, prog := range slices.Sorted(maps.Keys(t.SecretArguments)) {
		for i, e := range t.SecretArguments[prog] {
			if err := e.validate(); err != nil {
				return fmt.Errorf("secret_arguments[%q][%d]: %w", prog, i, err)
			}
		}
	}
	return nil
}

func (s SecretArg) validate() error {
	kinds := 0
	for _, set := range []bool{s.Option != "", s.OperandAfterName, s.LastOperandWith != "", s.LastOperand, s.FirstOperand} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds != 1:
		return fmt.Errorf("want exactly one of option, operand_after_name, last_operand_with, last_operand, first_operand")
	case s.Option != "" && !strings.HasPrefix(s.Option, "-") && !strings.HasPrefix(s.Option, "/"):
		return fmt.Errorf("option: %q is not an option (it starts with - or /)", s.Option)
	case s.LastOperandWith != "" && (len(s.LastOperandWith) != 2 || s.LastOperandWith[0] != '-' || s.LastOperandWith[1] == '-'):
		return fmt.Errorf("last_operand_with: %q is not a short option like \"-b\"", s.LastOperandWith)
	case s.Option == "" && (s.Attached || s.Prefix != ""):
		return fmt.Errorf("attached_only and prefix apply to an option's value only")
	case s.Option == "" && !s.FirstOperand && s.After != "":
		return fmt.Errorf("after applies to an option's value or first_operand only")
	case !s.OperandAfterName && len(s.Names) > 0:
		return fmt.Errorf("names applies to operand_after_name only")
	}
	return nil
}

// Secrets are the literal values of the analysed command's programs that
// the secret_arguments table calls secret, and those of assignments before
// a program (PGPASSWORD=… psql) whose name secretName calls secret. Words
// known only at run time are not values: there is nothing literal to mask.
// The leaves include wrapped commands and the scripts given to shells, so a
// secret is found through env, timeout, sshpass and bash -c alike.
func (t *Tables) Secrets(ctx context.Context, a *Analysis, secretName func(string) bool) []string {
	return t.secrets(ctx, a, secretName, 0)
}

// maxSecretScriptDepth bounds the here-string scripts searched inside
// here-string scripts.
const maxSecretScriptDepth = 4

func (t *Tables) secrets(ctx context.Context, a *Analysis, secretName func(string) bool, depth int) []string {
	if a == nil {
		return nil
	}
	var out []string
	if depth < maxSecretScriptDepth {
		for _, script := range a.secretScripts {
			if inner, err := t.Analyze(ctx, script); err == nil {
				out = append(out, t.secrets(ctx, inner, secretName, depth+1)...)
			}
		}
	}
	add := func(v string) {
		if v != "" {
			out = append(out, v)
		}
	}
	// A value as written (quotes, expansions) is masked by its literal
	// parts: masking "$1" or a closing quote would hide what is no secret.
	addWritten := func(v string) {
		for _, run := range literalRuns(v) {
			add(run)
		}
	}
	for _, l := range a.Leaves {
		if remote := sshRemoteCommand(l); remote != "" && depth < maxSecretScriptDepth {
			// The command ssh runs on the remote host is a shell script.
			if inner, err := t.Analyze(ctx, remote); err == nil {
				out = append(out, t.secrets(ctx, inner, secretName, depth+1)...)
			}
		}
		for _, as := range l.Assigns {
			if name, v, ok := strings.Cut(as, "="); ok && secretName != nil && secretName(name) {
				addWritten(v)
			}
		}
		entries := t.secretArgs(l.Name)
		if len(entries) == 0 {
			continue
		}
		// The words as bash reads them (a word known only at run time
		// stands for no value), the variables the script sets to one
		// literal read as it, and the words as written: a value written in
		// parts (-p"pw"x) is masked as it appears.
		exact, known := make([]string, len(l.Argv)), make([]string, len(l.Argv))
		for i := range l.Argv {
			exact[i], known[i] = l.Argv[i], l.Argv[i]
			if i < len(l.words) && l.words[i].kind != literal {
				exact[i] = unknownWord
				if i < len(l.Known) && l.Known[i] != l.Argv[i] {
					known[i] = l.Known[i]
				} else {
					known[i] = unknownWord
				}
			}
		}
		for _, e := range entries {
			e.values(exact, secretName, add)
			e.values(known, secretName, add)
			if len(l.Source) == len(l.Argv) {
				e.values(l.Source, secretName, addWritten)
			}
		}
	}
	return dropUnknown(out)
}

// unknownWord stands for a word known only at run time: no option, and no
// value to mask.
const unknownWord = "\x00"

func dropUnknown(list []string) []string {
	out := list[:0]
	for _, v := range list {
		if !strings.Contains(v, unknownWord) {
			out = append(out, v)
		}
	}
	return out
}

// literalRuns are the parts of a word as written that are literal text:
// what is left between quotes, backslashes and expansions ($NAME, ${…},
// $(…), `…`).
func literalRuns(w string) []string {
	if !strings.ContainsAny(w, "\"'$`\\") {
		return []string{w}
	}
	var runs []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			runs = append(runs, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case c == '"' || c == '\'' || c == '\\':
			flush()
		case c == '`':
			flush()
			if j := strings.IndexByte(w[i+1:], '`'); j >= 0 {
				i += j + 1
			}
		case c == '$' && i+1 < len(w) && w[i+1] == '{':
			// ${NAME:-word} and its kin: the word may be the value.
			flush()
			end := strings.IndexByte(w[i:], '}')
			if end < 0 {
				end = len(w) - i
			}
			inner := w[i+2 : i+end]
			if k := strings.IndexAny(inner, ":-=+?"); k >= 0 {
				runs = append(runs, literalRuns(strings.TrimLeft(inner[k:], ":-=+?"))...)
			}
			i += end
		case c == '$' && i+1 < len(w) && w[i+1] == '(':
			flush()
			open, closing := w[i+1], byte('}')
			if open == '(' {
				closing = ')'
			}
			depth := 0
			for i++; i < len(w); i++ {
				if w[i] == open {
					depth++
				} else if w[i] == closing {
					if depth--; depth == 0 {
						break
					}
				}
			}
		case c == '$':
			flush()
			if i+1 < len(w) && strings.IndexByte("@*#?$!-0123456789", w[i+1]) >= 0 {
				i++ // a special or positional parameter: one character
				continue
			}
			for i+1 < len(w) && isNameByte(w[i+1]) {
				i++
			}
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return runs
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// secretArgs are the table's entries for a program, by name, alias or
// version suffix (mysql8.0, python3.12).
func (t *Tables) secretArgs(name string) []SecretArg {
	if e, ok := t.SecretArguments[name]; ok {
		return e
	}
	if alias, ok := t.ProgramAliases[name]; ok {
		return t.SecretArguments[alias]
	}
	for prog, e := range t.SecretArguments {
		if sameProgram(name, prog) {
			return e
		}
	}
	return nil
}

// values calls add with each secret value this entry finds in argv.
func (s SecretArg) values(argv []string, secretName func(string) bool, add func(string)) {
	if len(argv) < 2 || !hasInOrder(argv[1:], s.Subcommand) {
		return
	}
	args := argv[1:]
	var operands []string
	withFlag := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w == "--" {
			operands = append(operands, args[i+1:]...)
			break
		}
		if strings.HasPrefix(s.Option, "/") && strings.HasPrefix(w, s.Option) {
			// A Windows-style option (xfreerdp /p:PASSWORD).
			if v, ok := s.optionValue(w, args, i); ok {
				add(s.secretPart(v.text))
			}
			continue
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			operands = append(operands, w)
			continue
		}
		if s.LastOperandWith != "" && !strings.HasPrefix(w, "--") && strings.ContainsRune(w[1:], rune(s.LastOperandWith[1])) {
			withFlag = true
		}
		if s.Option == "" {
			continue
		}
		if v, ok := s.optionValue(w, args, i); ok {
			if v.next {
				i++
			}
			add(s.secretPart(v.text))
		}
	}
	switch {
	case (s.LastOperandWith != "" && withFlag || s.LastOperand) && len(operands) > 0:
		add(operands[len(operands)-1])
	case s.FirstOperand && len(operands) > 0:
		add(s.secretPart(operands[0]))
	case s.OperandAfterName:
		for i := 0; i+1 < len(operands); i++ {
			if s.namesSecret(operands[i], secretName) {
				add(operands[i+1])
			}
		}
	}
}

type optValue struct {
	text string
	next bool // the value is the next word
}

// optionValue is the value of Option in word w (args[i]), if w is it.
func (s SecretArg) optionValue(w string, args []string, i int) (optValue, bool) {
	o := s.Option
	long := strings.HasPrefix(o, "--")
	switch {
	case (strings.HasSuffix(o, ":") || strings.HasSuffix(o, "=")) && strings.HasPrefix(w, o) && len(w) > len(o):
		return optValue{text: w[len(o):]}, true // xfreerdp /p:PASSWORD
	case w == o:
		if s.Attached || i+1 >= len(args) {
			return optValue{}, false
		}
		return optValue{text: args[i+1], next: true}, true
	case long && strings.HasPrefix(w, o+"="):
		return optValue{text: w[len(o)+1:]}, true
	case long && strings.HasPrefix(w, "--") && strings.Contains(w, "="):
		// getopt_long takes an unambiguous prefix (mysql --passw=X).
		name, v, _ := strings.Cut(w, "=")
		if len(name) >= len("--")+4 && strings.HasPrefix(o, name) {
			return optValue{text: v}, true
		}
	case !long && len(o) == 2 && !strings.HasPrefix(w, "--") && strings.HasPrefix(w, o) && len(w) > 2:
		return optValue{text: w[2:]}, true
	case !long && len(o) == 2 && !strings.HasPrefix(w, "--"):
		// Grouped after other letters (curl -su user:pw, mysql -vpPW): the
		// table does not know which of the letters before it take values,
		// so a group of letters holding it is read as ending in it —
		// masking too much rather than too little.
		at := strings.IndexByte(w[1:], o[1]) + 1
		if at < 2 || !onlyLetters(w[1:at]) {
			return optValue{}, false
		}
		if at+1 < len(w) {
			return optValue{text: w[at+1:]}, true
		}
		if s.Attached || i+1 >= len(args) {
			return optValue{}, false
		}
		return optValue{text: args[i+1], next: true}, true
	}
	return optValue{}, false
}

func onlyLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// secretPart is the part of an option's value that is secret.
func (s SecretArg) secretPart(v string) string {
	if s.Prefix != "" {
		rest, ok := strings.CutPrefix(v, s.Prefix)
		if !ok {
			return ""
		}
		v = rest
	}
	if s.After != "" {
		_, rest, ok := strings.Cut(v, s.After)
		if !ok {
			return ""
		}
		v = rest
	}
	return v
}

func (s SecretArg) namesSecret(name string, secretName func(string) bool) bool {
	for _, p := range s.Names {
		if strings.HasPrefix(strings.ToLower(name), strings.ToLower(p)) {
			return true
		}
	}
	return secretName != nil && secretName(name)
}

// hasInOrder reports whether words holds each of want, in order.
func hasInOrder(words, want []string) bool {
	for _, w := range words {
		if len(want) == 0 {
			return true
		}
		if w == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

// TextSecrets are the secrets of a command that does not parse (a stray
// quote, an unclosed substitution), read as well as words split at blanks
// and at the shell's operators allow, each word a possible program (so
// wrappers need no grammar): the second net where the analysis cannot
// read the command, erring toward masking.
func (t *Tables) TextSecrets(cmd string, secretName func(string) bool) []string {
	var out []string
	add := func(v string) {
		if v != "" {
			out = append(out, v)
		}
	}
	parts := strings.FieldsFunc(cmd, func(r rune) bool { return strings.ContainsRune(";&|()`\n{}", r) })
	for _, part := range parts {
		raw := strings.Fields(part)
		plain := make([]string, len(raw))
		for i, w := range raw {
			plain[i] = strings.NewReplacer(`'`, "", `"`, "", `\`, "").Replace(w)
			if name, v, ok := strings.Cut(plain[i], "="); ok && secretName != nil && secretName(name) && !strings.HasPrefix(name, "-") {
				add(v)
				if _, rv, ok := strings.Cut(raw[i], "="); ok {
					add(rv)
				}
			}
		}
		for j := range plain {
			name := plain[j][strings.LastIndexByte(plain[j], '/')+1:]
			for _, e := range t.secretArgs(name) {
				e.values(plain[j:], secretName, add)
				e.values(raw[j:], secretName, add)
			}
		}
	}
	return out
}

// sshValueOptions are ssh's options that take a value.
const sshValueOptions = "BbcDEeFIiJLlmOoPpQRSWw"

// sshRemoteCommand is the command an ssh leaf runs on the remote host:
// the words after its options and the host; "" when there are none.
func sshRemoteCommand(l Leaf) string {
	if l.Name != "ssh" || len(l.Argv) < 3 {
		return ""
	}
	args := l.Argv[1:]
	i := 0
	for i < len(args) {
		w := args[i]
		if w == "--" {
			i++
			break
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			break
		}
		if last := w[len(w)-1]; len(w) == 2 && strings.IndexByte(sshValueOptions, last) >= 0 {
			i++ // its value is the next word
		}
		i++
	}
	if i+1 >= len(args) {
		return ""
	}
	return strings.Join(args[i+1:], " ")
}

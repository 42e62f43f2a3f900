// Package approver authenticates the people who answer asks: the bearer
// tokens every approver surface (the approver's gRPC listener, the web
// console) accepts, each with a name recorded with every answer it gives
// and, with workspace binding, the workspace it answers for. An agent's
// workspace token is never one of them.
package approver

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/toolpdp/toolpdp/pdp/tokenfile"
)

// MinTokenLength is the shortest approver token accepted.
const MinTokenLength = 16

// Token is one approver token, read from a file that may rotate.
type Token struct {
	Name      string // who answers with it: the file's name without its extension
	Workspace string // the workspace it answers for; "" when it names none
	file      *tokenfile.File
}

// Tokens are the approver tokens of a server; nil or empty accepts none.
type Tokens struct {
	list []Token
}

// Parse reads specs of the form [WORKSPACE=]FILE (serve
// --approver-token-file). A missing, unreadable or short token is an
// error, and so are two files of one name.
func Parse(specs []string, log *slog.Logger) (*Tokens, error) {
	t := &Tokens{}
	names := map[string]string{}
	for _, spec := range specs {
		ws, file, ok := strings.Cut(spec, "=")
		if !ok {
			ws, file = "", spec
		}
		if file == "" {
			return nil, fmt.Errorf("--approver-token-file %q: not [WORKSPACE=]FILE", spec)
		}
		name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		if prev, dup := names[name]; dup {
			return nil, fmt.Errorf("--approver-token-file: %s and %s have one name (%s): the decision log could not tell their answers apart", prev, file, name)
		}
		names[name] = file
		f, err := tokenfile.Open(file, MinTokenLength, "approver token "+name, log)
		if err != nil {
			return nil, fmt.Errorf("--approver-token-file: %w", err)
		}
		t.list = append(t.list, Token{Name: name, Workspace: ws, file: f})
	}
	return t, nil
}

// Enabled reports whether any approver token is configured.
func (t *Tokens) Enabled() bool { return t != nil && len(t.list) > 0 }

// Identify is the approver a presented token belongs to. Every token is
// compared, in constant time.
func (t *Tokens) Identify(presented string) (Token, bool) {
	var found Token
	ok := false
	if t == nil || presented == "" {
		return found, false
	}
	for _, tok := range t.list {
		cur, err := tok.file.Token()
		if err != nil || cur == "" {
			continue
		}
		if subtle.ConstantTimeCompare([]byte(presented), []byte(cur)) == 1 && !ok {
			found, ok = tok, true
		}
	}
	return found, ok
}

// Overlaps reports the name of an approver token equal to one of tokens
// (an agent's workspace tokens): a server must refuse to start with one.
func (t *Tokens) Overlaps(tokens []string) (string, bool) {
	for _, tok := range t.list {
		cur, _ := tok.file.Token()
		for _, other := range tokens {
			if subtle.ConstantTimeCompare([]byte(cur), []byte(other)) == 1 {
				return tok.Name, true
			}
		}
	}
	return "", false
}

// Files are the token files, for the server to keep current (and re-read
// on SIGHUP).
func (t *Tokens) Files() []*tokenfile.File {
	if t == nil {
		return nil
	}
	out := make([]*tokenfile.File, 0, len(t.list))
	for _, tok := range t.list {
		out = append(out, tok.file)
	}
	return out
}

// Bearer is the token of an Authorization header "Bearer TOKEN"; "" for
// any other.
func Bearer(header string) string {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(tok)
}

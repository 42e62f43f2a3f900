package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A token file named twice, or one token in two workspaces' files, is a
// start-up error naming both flags: which workspace it bound would depend
// on the order of the flags.
func TestTokenFilesMustBeDistinct(t *testing.T) {
	dir := t.TempDir()
	write := func(name, token string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := write("a", "a-token-0123456789"), write("b", "a-token-0123456789")
	sock := "unix://" + filepath.Join(dir, "s.sock")
	for name, specs := range map[string][]string{
		"one file":   {"acme=" + a, "globex=" + a},
		"one token":  {"acme=" + a, "globex=" + b},
		"one name":   {"acme=" + a, "acme=" + write("c", "c-token-0123456789")},
		"short":      {"acme=" + write("d", "short")},
		"no file":    {"acme=" + filepath.Join(dir, "missing")},
		"not a pair": {"acme"},
	} {
		_, err := New(context.Background(), Config{Listen: []string{sock}, WorkspaceTokens: specs})
		if err == nil {
			t.Errorf("%s: a server started", name)
			continue
		}
		if strings.HasPrefix(name, "one ") && (!errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "acme")) {
			t.Errorf("%s: %v", name, err)
		}
	}
	s := start(t, Config{Listen: []string{sock}, WorkspaceTokens: []string{"acme=" + a, "globex=" + write("e", "e-token-0123456789")}})
	if n := len(s.tokens); n != 2 {
		t.Errorf("%d token files kept current, want 2", n)
	}
}

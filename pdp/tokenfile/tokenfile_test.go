package tokenfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Secret volume's rotation — a new timestamped directory and the ..data
// symlink swapped to it — is read at the next Reload; the old token is
// gone, and a file that goes missing holds no token at all.
func TestRotationThroughDataSymlink(t *testing.T) {
	dir := t.TempDir()
	write := func(ts, token string) {
		d := filepath.Join(dir, ts)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "token"), []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(ts, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	write("..2026_01", "old-token-0123456789")
	if err := os.Symlink("..data/token", filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	f, err := Open(filepath.Join(dir, "token"), 16, "--workspace-token acme", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := f.Token(); tok != "old-token-0123456789" {
		t.Fatalf("token %q", tok)
	}
	write("..2026_02", "new-token-0123456789")
	if !f.Reload() {
		t.Fatal("the swap was not seen")
	}
	if tok, _ := f.Token(); tok != "new-token-0123456789" {
		t.Fatalf("after the swap: %q", tok)
	}
	if err := os.Remove(filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	f.Reload()
	if tok, err := f.Token(); tok != "" || err == nil {
		t.Fatalf("a deleted file still gives %q", tok)
	}
}

// Start-up refuses a short token; a FIFO never blocks a read; one file
// named twice is an error naming both flags.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc"), 0o600)
	if _, err := Open(short, 16, "--workspace-token acme", nil); err == nil || !strings.Contains(err.Error(), "shorter than 16") {
		t.Errorf("short: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Open(fifo, 1, "x", nil); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO gave a token")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a FIFO blocked the read")
	}
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("a-token-0123456789"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(good, link)
	err := Distinct(map[string]string{"--workspace-token acme": good, "--workspace-token globex": link})
	if err == nil || !strings.Contains(err.Error(), "acme") || !strings.Contains(err.Error(), "globex") {
		t.Errorf("one file twice: %v", err)
	}
	if err := Distinct(map[string]string{"--workspace-token acme": good, "--workspace-token globex": short}); err != nil {
		t.Errorf("two files: %v", err)
	}
}

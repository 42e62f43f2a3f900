// Package tokenfile holds credentials read from files that rotate: bearer
// tokens of workspaces, of approvers and of bundle servers. A File is read
// once at start (a missing or short token is a start-up error), then again
// whenever it may have changed — every RefreshEvery, and on Reload (serve's
// SIGHUP) — and the new token replaces the old at once: the old one is
// refused from then on.
//
// It re-reads the path, never a file descriptor or a watch on the file:
// a Kubernetes Secret update is a swap of the volume's ..data symlink
// (as for ConfigMaps) and an editor's save is a rename, both of which
// leave a watched file or an open descriptor on the old content. Polling a
// file of a few bytes every second costs nothing, and works on file
// systems that send no events.
package tokenfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultRefresh is how often a File is re-read.
const DefaultRefresh = time.Second

// maxTokenBytes bounds a token file: a token, not a document.
const maxTokenBytes = 64 << 10

// File is a token read from a file and kept current.
type File struct {
	Path string
	// MinLength is the shortest token accepted; a shorter one (an empty
	// file mid-write included) counts as no token.
	MinLength int
	// Purpose names the flag in messages: "--workspace-token acme".
	Purpose string
	Logger  *slog.Logger

	cur atomic.Pointer[state]
	mu  sync.Mutex // serialises reads
}

type state struct {
	token string
	err   error
}

// Open reads the token file now; an unreadable file or a token shorter than
// minLength is an error, as a start-up error should be.
func Open(path string, minLength int, purpose string, log *slog.Logger) (*File, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &File{Path: path, MinLength: minLength, Purpose: purpose, Logger: log}
	f.Reload()
	if _, err := f.Token(); err != nil {
		return nil, err
	}
	return f, nil
}

// Token is the current token, or why there is none (the file went missing
// or holds no valid token since the last read): then nothing is accepted.
func (f *File) Token() (string, error) {
	s := f.cur.Load()
	if s == nil {
		return "", fmt.Errorf("%s: %s not read yet", f.Purpose, f.Path)
	}
	return s.token, s.err
}

// Reload re-reads the file and reports whether the token changed. A change
// is logged (without the token).
func (f *File) Reload() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	token, err := read(f.Path)
	if err == nil && len(token) < f.MinLength {
		err = fmt.Errorf("the token in it is shorter than %d characters", f.MinLength)
	}
	if err != nil {
		token, err = "", fmt.Errorf("%s: %s: %w", f.Purpose, f.Path, err)
	}
	old := f.cur.Load()
	if old != nil && old.token == token && errString(old.err) == errString(err) {
		return false
	}
	f.cur.Store(&state{token: token, err: err})
	switch {
	case old == nil:
	case err != nil:
		f.Logger.Error("credential file holds no valid token; nothing is accepted for it until it does", "credential", f.Purpose, "error", err.Error())
	default:
		f.Logger.Info("credential rotated: the new token is in force and the old one refused", "credential", f.Purpose, "file", f.Path)
	}
	return true
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Run re-reads the file every refresh (DefaultRefresh when zero) until ctx
// ends.
func (f *File) Run(ctx context.Context, refresh time.Duration) {
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(refresh):
			f.Reload()
		}
	}
}

// read reads a token file without blocking on a FIFO and without reading
// more than a token's worth of bytes.
func read(path string) (string, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	raw, err := io.ReadAll(io.LimitReader(fh, maxTokenBytes+1))
	if err != nil {
		return "", err
	}
	if len(raw) > maxTokenBytes {
		return "", fmt.Errorf("more than %d bytes: not a token", maxTokenBytes)
	}
	return strings.TrimSpace(string(raw)), nil
}

// Distinct is an error when two flags name the same file: one file cannot
// hold two workspaces' (or an approver's and a workspace's) tokens, and
// which one it binds would depend on the order of the flags.
func Distinct(paths map[string]string) error {
	type seen struct {
		purpose string
		info    os.FileInfo
	}
	var all []seen
	for purpose, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%s: %w", purpose, err)
		}
		for _, s := range all {
			if os.SameFile(s.info, info) {
				a, b := s.purpose, purpose
				if a > b {
					a, b = b, a
				}
				return fmt.Errorf("%s and %s name the same token file (%s): give each its own", a, b, filepath.Clean(p))
			}
		}
		all = append(all, seen{purpose, info})
	}
	return nil
}

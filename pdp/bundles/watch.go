package bundles

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WatchConfig tunes Watch.
type WatchConfig struct {
	// Debounce: events closer together than this give one reload. Editors
	// write a file as truncate + write, or rename-and-replace; a ConfigMap
	// update is a burst of six events on ..data and its timestamped dirs.
	Debounce time.Duration
	// Poll: how often changed is called regardless of events, the safety
	// net for events a file system does not send (NFS, FUSE, overflows); the
	// caller compares content hashes. Remote sources are polled as often.
	Poll   time.Duration
	Logger *slog.Logger
	// Watching, when set, is called once every watch is in place.
	Watching func()
	// Failed, when set, is told of every failed download from a bundle
	// server (each is also logged, at a bounded rate, and kept for Status).
	Failed Failed
}

// Watch calls changed whenever the sources may have changed, until ctx
// ends: after a burst of file events, after each download of a remote
// source, and every Poll. It only announces; the caller re-reads and
// compares content (Hash), so a burst of events and the poll together
// still give one reload per change.
//
// It watches directories, never files: a file's watch is lost when an
// editor or the kubelet replaces it. A tarball is watched through its
// parent directory.
func (s *Sources) Watch(ctx context.Context, c WatchConfig, changed func()) error {
	if err := s.startRemote(ctx, c.Poll, c.Logger, changed, c.Failed); err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	s.watchAll(w, c.Logger)
	if c.Watching != nil {
		c.Watching()
	}
	poll := time.NewTicker(c.Poll)
	defer poll.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod {
				continue // chmod alone changes no content
			}
			if ev.Op&fsnotify.Create != 0 {
				if info, err := os.Stat(ev.Name); err == nil && info.IsDir() {
					watchTree(w, ev.Name, c.Logger) // watches are not recursive
				}
			}
			debounce.Reset(c.Debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				debounce.Reset(c.Debounce) // events were lost: something changed
				continue
			}
			c.Logger.Warn("bundle watch error", "error", err.Error())
		case <-debounce.C:
			s.watchAll(w, c.Logger) // a bundle that appeared or was replaced whole
			changed()
		case <-poll.C:
			changed()
		}
	}
}

// watchAll watches every local source.
func (s *Sources) watchAll(w *fsnotify.Watcher, log *slog.Logger) {
	for _, p := range s.Paths {
		if !IsRemote(p) {
			watchTree(w, p, log)
		}
	}
}

// watchTree watches a bundle directory and its subdirectories, or a
// tarball's directory. Errors are logged, not fatal: the poll still runs.
func watchTree(w *fsnotify.Watcher, p string, log *slog.Logger) {
	info, err := os.Stat(p)
	if err != nil {
		_ = w.Add(filepath.Dir(p)) // not there yet: see it appear
		return
	}
	if !info.IsDir() {
		if err := w.Add(filepath.Dir(p)); err != nil {
			log.Warn("cannot watch bundle directory", "path", filepath.Dir(p), "error", err.Error())
		}
		return
	}
	_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if err := w.Add(path); err != nil {
			log.Warn("cannot watch bundle directory", "path", path, "error", err.Error())
		}
		return nil
	})
}

package pdp

import (
	"context"
	"errors"
	"io/fs"
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
	// Poll: how often the bundles' content hash is compared, the safety net
	// for events a file system does not send (NFS, FUSE, overflows).
	Poll time.Duration
	// Watching, when set, is called once every watch is in place.
	Watching func()
}

// Watch reloads the bundles when they change, until ctx ends. It watches
// directories, never files: a file's watch is lost when an editor or the
// kubelet replaces it. A tarball is watched through its parent directory.
// Reloads whose content did not change are skipped, so a burst of events
// and the poll together still give exactly one reload per change.
func (l *Loader) Watch(ctx context.Context, c WatchConfig) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	for _, p := range l.sources.Paths {
		if !IsRemote(p) {
			l.watchTree(w, p)
		}
	}
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
					l.watchTree(w, ev.Name) // watches are not recursive
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
			l.log.Warn("bundle watch error", "error", err.Error())
		case <-debounce.C:
			for _, p := range l.sources.Paths {
				if !IsRemote(p) {
					l.watchTree(w, p) // a bundle that appeared or was replaced whole
				}
			}
			_ = l.Reload(ctx, false)
		case <-poll.C:
			_ = l.Reload(ctx, false)
		}
	}
}

// watchTree watches a bundle directory and its subdirectories, or a
// tarball's directory. Errors are logged, not fatal: the poll still runs.
func (l *Loader) watchTree(w *fsnotify.Watcher, p string) {
	info, err := os.Stat(p)
	if err != nil {
		_ = w.Add(filepath.Dir(p)) // not there yet: see it appear
		return
	}
	if !info.IsDir() {
		if err := w.Add(filepath.Dir(p)); err != nil {
			l.log.Warn("cannot watch bundle directory", "path", filepath.Dir(p), "error", err.Error())
		}
		return
	}
	_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if err := w.Add(path); err != nil {
			l.log.Warn("cannot watch bundle directory", "path", path, "error", err.Error())
		}
		return nil
	})
}

package policy

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/toolpdp/toolpdp/envguard"
)

// resolver resolves the paths of one decision. A path whose every segment
// exists and none is a symlink resolves to itself cleaned: the kernel
// proves that in one walk that refuses symlinks (openat2 with
// RESOLVE_NO_SYMLINKS), where envguard's walk costs one lstat a segment.
// Any other path (a symlink on the way, a missing segment, ~, a URL, an
// error) takes envguard's walk, which decides what it resolves to. Nothing
// is kept across decisions: every call sees the file system as it is now,
// so a re-pointed symlink is noticed at once. Within one decision, a path
// that is a prefix of one the kernel already walked is link-free too (a
// policy's roots are usually prefixes of the call's paths).
type resolver struct {
	ctx    context.Context
	walked []string // paths the kernel walked without meeting a symlink
}

func (r *resolver) resolve(cwd, raw string) (string, error) {
	if p, ok := r.linkFree(cwd, raw); ok {
		return p, nil
	}
	return envguard.ResolveContext(r.ctx, cwd, raw)
}

// linkFree is raw's resolution when the path is plain, exists and holds no
// symlink; ok is false when envguard must walk it.
func (r *resolver) linkFree(cwd, raw string) (resolved string, ok bool) {
	if r.ctx.Err() != nil || !plainPath(raw) {
		return "", false
	}
	p := raw
	if !filepath.IsAbs(raw) {
		if !filepath.IsAbs(cwd) || !plainPath(cwd) {
			return "", false
		}
		p = cwd + "/" + raw
	}
	if !r.walkedThrough(p) {
		if !walkWithoutLinks(p) {
			return "", false
		}
		r.walked = append(r.walked, p)
	}
	return filepath.Clean(p), true
}

// walkedThrough reports p as a prefix, at a segment boundary, of a path
// the kernel walked in this decision: every segment of p was then a
// directory or the file itself, and none a symlink.
func (r *resolver) walkedThrough(p string) bool {
	for _, w := range r.walked {
		if w == p || strings.HasPrefix(w, p) && (strings.HasSuffix(p, "/") || w[len(p)] == '/') {
			return true
		}
	}
	return false
}

// plainPath is a path envguard would walk as written: no NUL, within
// the length bound, not ~ and not a URL.
func plainPath(p string) bool {
	return p != "" && strings.IndexByte(p, 0) < 0 && len(p) <= envguard.MaxPathBytes &&
		!strings.HasPrefix(p, "~") && !envguard.IsURL(p)
}

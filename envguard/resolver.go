package envguard

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// A Resolver resolves the paths of one decision. A path whose every
// segment exists and none is a symlink resolves to itself cleaned: the
// kernel proves that in one walk that refuses symlinks (openat2 with
// RESOLVE_NO_SYMLINKS), where the walk costs one lstat a segment; so does
// a path whose last segment alone is missing (a file to be made) under
// such a directory. Any other path (a symlink on the way, a missing
// directory, ~, a URL, an error) takes the walk, which decides what it
// resolves to. Nothing is kept across decisions: every decision sees the
// file system as it is now, so a re-pointed symlink is noticed at once.
// Within one decision, a path that is a prefix of one the kernel already
// walked is link-free too (a policy's roots are usually prefixes of the
// call's paths, and a command's words mostly name files in its cwd).
// Not safe for concurrent use.
type Resolver struct {
	ctx    context.Context
	walked []string // paths the kernel walked without meeting a symlink
}

// NewResolver is a Resolver for one decision; ctx stops its walks.
func NewResolver(ctx context.Context) *Resolver { return &Resolver{ctx: ctx} }

// Context is the context the resolver's walks stop with.
func (r *Resolver) Context() context.Context { return r.ctx }

// Resolve is ResolveContext with the resolver's context, in one kernel
// walk or none where it can.
func (r *Resolver) Resolve(cwd, raw string) (string, error) {
	if r.ctx.Err() == nil && plainName(raw) {
		p := raw
		if !filepath.IsAbs(raw) {
			p = ""
			if filepath.IsAbs(cwd) && plainName(cwd) {
				p = cwd + "/" + raw
			}
		}
		if p != "" {
			if resolved, ok := r.linkFree(p); ok {
				return resolved, nil
			}
		}
	}
	return ResolveContext(r.ctx, cwd, raw)
}

// linkFree is the absolute path p cleaned when the kernel's walk proves
// nothing on it is a symlink; ok is false when the walk must decide.
func (r *Resolver) linkFree(p string) (string, bool) {
	if r.walkedThrough(p) {
		return filepath.Clean(p), true
	}
	if !hasDotDot(p) {
		// Under a directory walked in this decision only the last segment
		// is left to prove: one lstat, which opens nothing.
		clean := filepath.Clean(p)
		if dir := filepath.Dir(clean); dir != clean && r.walkedThrough(dir) {
			switch link, err := isLink(clean); {
			case err == nil && !link:
				r.walked = append(r.walked, clean)
				return clean, true
			case errors.Is(err, fs.ErrNotExist):
				return clean, true
			}
		}
	}
	switch err := noLinks(p); {
	case err == nil:
		r.walked = append(r.walked, p)
		return filepath.Clean(p), true
	case errors.Is(err, fs.ErrNotExist) && !hasDotDot(p):
		// Only the last segment missing: it cannot be a link, and nothing
		// after it can climb back.
		dir := filepath.Dir(filepath.Clean(p))
		if r.walkedThrough(dir) {
			return filepath.Clean(p), true
		}
		if noLinks(dir) == nil {
			r.walked = append(r.walked, dir)
			return filepath.Clean(p), true
		}
	}
	return "", false
}

// walkedThrough reports p as a prefix, at a segment boundary, of a path
// the kernel walked in this decision: every segment of p was then a
// directory or the file itself, and none a symlink.
func (r *Resolver) walkedThrough(p string) bool {
	for _, w := range r.walked {
		if w == p || strings.HasPrefix(w, p) && (strings.HasSuffix(p, "/") || w[len(p)] == '/') {
			return true
		}
	}
	return false
}

// plainName is a path the walk would take as written: no NUL, within the
// length bound, not ~ and not a URL.
func plainName(p string) bool {
	return p != "" && strings.IndexByte(p, 0) < 0 && len(p) <= MaxPathBytes && !strings.HasPrefix(p, "~") && !IsURL(p)
}

// LinkFree reports that the kernel walked the absolute path p to an
// existing file without meeting a symlink: then p resolves to itself,
// cleaned, in one system call where the walk costs one lstat a segment.
// False for anything else (a symlink, a missing segment, no openat2 on
// this kernel): the walk decides.
func LinkFree(p string) bool { return noLinks(p) == nil }

func hasDotDot(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

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
// walk or none where it can, else in the walk alone.
func (r *Resolver) Resolve(cwd, raw string) (string, error) {
	p, err := absolute(cwd, raw)
	if err != nil {
		return "", err
	}
	if r.ctx.Err() == nil && len(p) <= MaxPathBytes {
		if resolved, ok := r.linkFree(p); ok {
			return resolved, nil
		}
	}
	return walk(r.ctx, p)
}

// linkFree is the absolute path p cleaned when the kernel's walk proves
// nothing on it is a symlink; ok is false when the walk must decide.
func (r *Resolver) linkFree(p string) (string, bool) {
	clean := filepath.Clean(p)
	if r.walkedThrough(p) {
		return clean, true
	}
	// With no .. in p, nothing after a missing or proven segment can climb
	// back into one that is not.
	dotdot := hasDotDot(p)
	dir := filepath.Dir(clean)
	if !dotdot && dir != clean && r.walkedThrough(dir) {
		// Under a directory walked in this decision only the last segment
		// is left to prove: one lstat, which opens nothing.
		switch link, err := isLink(clean); {
		case err == nil && !link:
			r.walked = append(r.walked, clean)
			return clean, true
		case errors.Is(err, fs.ErrNotExist):
			return clean, true
		}
	}
	switch err := noLinks(p); {
	case err == nil:
		r.walked = append(r.walked, p)
		return clean, true
	case errors.Is(err, fs.ErrNotExist) && !dotdot:
		// Only the last segment missing: it cannot be a link.
		if r.walkedThrough(dir) {
			return clean, true
		}
		if noLinks(dir) == nil {
			r.walked = append(r.walked, dir)
			return clean, true
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

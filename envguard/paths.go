package envguard

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MaxPathBytes bounds a path argument; longer is not a path (Linux's PATH_MAX).
const MaxPathBytes = 4096

// maxLinks bounds the symlinks followed while resolving one path, as the
// kernel's ELOOP does: a loop is reported, never walked forever.
const maxLinks = 40

// ErrInvalid marks a value that cannot be a path at all (NUL byte, too long,
// not a string). It is refused wherever it appears.
var ErrInvalid = errors.New("not a path")

// ErrUnresolved marks a path that could not be resolved (relative with no
// working directory, a symlink loop, an unreadable directory). It cannot be
// checked against a scope.
var ErrUnresolved = errors.New("cannot resolve")

// Resolve returns the canonical absolute form of raw: relative to cwd when
// raw is relative, every symlink followed, `.` and `..` cleaned. A path that
// does not exist yet (a new file) resolves through its deepest existing
// ancestor. Errors wrap ErrInvalid or ErrUnresolved.
//
// A path starting with ~ (a shell's home directory) or written as a URL
// (file:///etc/passwd) is not a plain path: it is ErrUnresolved, never
// taken as a relative name.
func Resolve(cwd, raw string) (string, error) {
	return ResolveContext(context.Background(), cwd, raw)
}

// ResolveContext is Resolve that stops, with an ErrUnresolved error
// wrapping ctx's, as soon as ctx is done: a path of many segments and
// links costs many system calls.
func ResolveContext(ctx context.Context, cwd, raw string) (string, error) {
	p, err := absolute(cwd, raw)
	if err != nil {
		return "", err
	}
	return canonical(ctx, p)
}

// absolute is raw as an absolute path from cwd, not yet resolved, or why
// it is not a path that can be resolved.
func absolute(cwd, raw string) (string, error) {
	if err := checkPath(raw); err != nil {
		return "", err
	}
	if err := plain(raw); err != nil {
		return "", err
	}
	if filepath.IsAbs(raw) {
		return raw, nil
	}
	if cwd == "" {
		return "", fmt.Errorf("%w: relative path and no policy cwd", ErrUnresolved)
	}
	if err := checkPath(cwd); err != nil {
		return "", err
	}
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("%w: policy cwd %q is not absolute", ErrUnresolved, cwd)
	}
	return cwd + "/" + raw, nil
}

// plain rejects what a tool or a shell would read as something other than
// a file name: ~ and ~user (home directories, expanded by shells and some
// tools, never here) and URLs (scheme://...).
func plain(p string) error {
	if strings.HasPrefix(p, "~") {
		return fmt.Errorf("%w: a path starting with ~ is not a plain path (home directories are not expanded here)", ErrUnresolved)
	}
	if IsURL(p) {
		return fmt.Errorf("%w: a path written as a URL is not a plain path", ErrUnresolved)
	}
	return nil
}

// IsURL reports whether p starts with a URL scheme and "://" (file://,
// http://): a scheme is a letter, then letters, digits, "+", "-" or ".".
func IsURL(p string) bool {
	if len(p) >= 5 && strings.EqualFold(p[:5], "file:") {
		return true // file:/etc/passwd, a file URL with one slash
	}
	i := strings.Index(p, "://")
	if i < 1 {
		return false
	}
	for j, c := range p[:i] {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

func checkPath(p string) error {
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%w: contains a NUL byte", ErrInvalid)
	}
	if len(p) > MaxPathBytes {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalid, MaxPathBytes)
	}
	return nil
}

// canonical walks an absolute path one segment at a time from "/", following
// each symlink it meets (the link's target is spliced in front of what is
// left). What is kept in done has no links (its segments are real
// directories, or missing), so a `..` may be applied to it lexically. A
// path the kernel walks with no symlink on it (LinkFree) needs no walk:
// it is itself, cleaned.
func canonical(ctx context.Context, path string) (string, error) {
	if ctx.Err() == nil && len(path) <= MaxPathBytes {
		var once Resolver // nothing walked yet
		if resolved, ok := once.linkFree(path); ok {
			return resolved, nil
		}
	}
	return walk(ctx, path)
}

// walk is canonical one segment at a time.
func walk(ctx context.Context, path string) (string, error) {
	done, rest, links := "/", path, 0
	for rest != "" {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("%w: %w", ErrUnresolved, err)
		}
		var seg string
		seg, rest, _ = strings.Cut(rest, "/")
		switch seg {
		case "", ".":
			continue
		case "..":
			done = filepath.Dir(done)
			continue
		}
		next := filepath.Join(done, seg)
		info, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			// Missing (a new file): it cannot be a link. Keep walking, since
			// a later ".." may climb back into segments that can be.
			done = next
			continue
		case err != nil:
			return "", fmt.Errorf("%w: %v", ErrUnresolved, err)
		case info.Mode()&fs.ModeSymlink == 0:
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%w: more than %d symlinks (a loop?) at %s", ErrUnresolved, maxLinks, next)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrUnresolved, err)
		}
		if filepath.IsAbs(target) {
			done = "/"
		}
		if len(target)+len(rest) > MaxPathBytes {
			return "", fmt.Errorf("%w: symlinks expand past %d bytes at %s", ErrUnresolved, MaxPathBytes, next)
		}
		rest = target + "/" + rest
	}
	return done, nil
}

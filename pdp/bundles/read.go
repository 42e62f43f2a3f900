package bundles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/loader/filter"
)

// Defaults of Limits. A bundle's files are held in memory while it loads,
// and a data document takes up to some seventy times its size once parsed
// and loaded beside the policy that serves (a bundle server sending 512 KB
// of small JSON arrays, new at every poll, holds the sidecar at 108 MB with
// the shipped GOMEMLIMIT; 1 MiB of them, at 140 MB), so the default keeps
// the worst shape inside the shipped 128 Mi container limit. Agent
// definitions and guardrails take a few KiB.
const (
	DefaultMaxBundleBytes   = 512 << 10
	DefaultMaxBundleEntries = 10000
)

// Limits bound what reading one bundle may take, whatever holds it — a
// directory, a tarball, a bundle server's answer. Every file counts, those
// OPA's reader ignores too (they are counted, not held), so a bundle of
// many small files is refused as surely as one big one.
type Limits struct {
	MaxBytes   int64 // the bytes of all its files together; 0: DefaultMaxBundleBytes
	MaxEntries int   // its files and directories; 0: DefaultMaxBundleEntries
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBundleBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxBundleEntries
	}
	return l
}

// ErrTooLarge marks a bundle over its Limits.
var ErrTooLarge = errors.New("bundle over its bound")

// budget counts what one read has taken against its Limits.
type budget struct {
	Limits
	bytes   int64
	entries int
}

func newBudget(l Limits) *budget { return &budget{Limits: l.withDefaults()} }

func (b *budget) entry(name string) error {
	if b.entries++; b.entries > b.MaxEntries {
		return fmt.Errorf("%s: %w: more than %d files and directories (--max-bundle-entries)", name, ErrTooLarge, b.MaxEntries)
	}
	return nil
}

func (b *budget) take(name string, n int64) error {
	if b.bytes += n; b.bytes > b.MaxBytes || n < 0 {
		return fmt.Errorf("%s: %w: its files hold more than %d bytes in all (--max-bundle-bytes)", name, ErrTooLarge, b.MaxBytes)
	}
	return nil
}

// left is how many bytes a file may still hold.
func (b *budget) left() int64 { return b.MaxBytes - b.bytes }

// file is one file of a bundle, read whole and bounded.
type file struct {
	path string // as OPA names it: "/x/y.rego" in a directory, the entry's name in a tarball
	url  string
	data []byte
}

// readsAll reports whether a bundle read with vc needs every file: a
// signed bundle's signature covers files OPA otherwise ignores.
func readsAll(vc *bundle.VerificationConfig) bool { return vc != nil }

// opaReads reports whether OPA's bundle reader uses a file of this name;
// the others are counted against the bound and never held.
func opaReads(name string) bool {
	base := path.Base(name)
	switch {
	case strings.HasSuffix(name, bundle.RegoExt), strings.HasSuffix(name, bundle.ManifestExt), strings.HasSuffix(name, bundle.ManifestProtoExt),
		bundle.IsSignaturesFile(name), bundle.IsYAMLDataFile(name):
		return true
	}
	switch base {
	case "data.json", "patch.json", bundle.WasmFile, bundle.PlanFile, bundle.PlanProtoFile:
		return true
	}
	return false
}

// readDir reads a bundle directory: regular files, and symlinks that lead
// to a regular file inside it; anything else — a FIFO, a device, a socket,
// a symlink out of the bundle or to a directory — is an error naming the
// file, never a read that could block or never end.
func readDir(root string, lim Limits, all bool) ([]file, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	w := &dirWalk{root: root, realRoot: realRoot, b: newBudget(lim), all: all}
	if err := w.dir(""); err != nil {
		return nil, err
	}
	return w.out, nil
}

// dirWalk reads a bundle directory depth first. Each directory is listed
// a chunk at a time, every name counted as it comes, so a directory of a
// million files costs no more than the bound before it is refused.
type dirWalk struct {
	root, realRoot string
	b              *budget
	all            bool
	out            []file
}

func (w *dirWalk) dir(rel string) error {
	entries, err := w.list(rel)
	if err != nil {
		return err
	}
	for _, d := range entries {
		if err := w.entry(filepath.Join(rel, d.Name()), d); err != nil {
			return err
		}
	}
	return nil
}

// list lists one directory, sorted, counting each entry against the bound.
func (w *dirWalk) list(rel string) ([]fs.DirEntry, error) {
	f, err := os.Open(filepath.Join(w.root, rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []fs.DirEntry
	for {
		chunk, err := f.ReadDir(256)
		for _, d := range chunk {
			if err := w.b.entry(filepath.Join(rel, d.Name())); err != nil {
				return nil, err
			}
		}
		all = append(all, chunk...)
		if errors.Is(err, io.EOF) || (err == nil && len(chunk) == 0) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name() < all[j].Name() })
	return all, nil
}

func (w *dirWalk) entry(rel string, d fs.DirEntry) error {
	p := filepath.Join(w.root, rel)
	if d.IsDir() {
		if strings.HasPrefix(d.Name(), "..") {
			return nil // kubelet's timestamped dirs: ..data already chose one
		}
		return w.dir(rel)
	}
	target := p
	if d.Type()&fs.ModeSymlink != 0 {
		var err error
		if target, err = symlinkInside(w.realRoot, p); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	}
	info, err := os.Lstat(target)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s: %s: a bundle holds only regular files and directories", rel, kindOf(info.Mode()))
	}
	slashed := "/" + filepath.ToSlash(rel)
	if !w.all && !opaReads(slashed) {
		return w.b.take(rel, info.Size())
	}
	data, err := readRegular(target, w.b.left())
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if err := w.b.take(rel, int64(len(data))); err != nil {
		return err
	}
	w.out = append(w.out, file{path: slashed, url: filepath.Join(w.root, slashed), data: data})
	return nil
}

// symlinkInside resolves a symlink that must lead to a file inside root.
func symlinkInside(realRoot, p string) (string, error) {
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("a symlink that leads nowhere: %w", err)
	}
	if rel, err := filepath.Rel(realRoot, target); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("a symlink out of the bundle (to %s): a bundle holds only its own files", target)
	}
	info, err := os.Stat(target)
	if err != nil {
		return "", err
	}
	if info.IsDir() {
		return "", errors.New("a symlink to a directory: symlinked directories are not read, give the directory itself")
	}
	return target, nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a regular file"
}

// readRegular reads at most limit bytes of a regular file. It opens
// without blocking and checks the opened file itself, so a file swapped for
// a FIFO between the walk and the read cannot stall it.
func readRegular(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: a bundle holds only regular files and directories", kindOf(info.Mode()))
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d the bundle's bound leaves (--max-bundle-bytes)", ErrTooLarge, info.Size(), max(limit, 0))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: it grew past the %d bytes the bundle's bound leaves (--max-bundle-bytes)", ErrTooLarge, limit)
	}
	return data, nil
}

// readTarball reads an `opa build` .tar.gz as it streams in: each entry
// is checked against the bound from its header before any of it is read,
// entries OPA ignores are skipped, not held, and anything but a regular
// file or a directory is an error naming the entry.
func readTarball(r io.Reader, baseURL string, lim Limits, all bool) ([]file, error) {
	b := newBudget(lim)
	// The compressed stream is bounded too; gzip adds a little to data it cannot shrink.
	gz, err := gzip.NewReader(io.LimitReader(r, b.MaxBytes+b.MaxBytes/64+1<<16))
	if err != nil {
		return nil, fmt.Errorf("not a .tar.gz bundle: %w", err)
	}
	// What the tar reader consumes without returning — headers, padding,
	// PAX records, long names — is bounded as well: a stream of them never
	// reaches the entry count.
	tr := tar.NewReader(&boundedReader{r: gz, left: b.MaxBytes + int64(b.MaxEntries)*2048 + 1<<20})
	var out []file
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("not a .tar.gz bundle: %w", unexpected(err))
		}
		if err := b.entry(h.Name); err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader: // a directory; a comment (git archive writes its commit id)
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("%s: a tar entry of type %q: a bundle holds only regular files and directories", h.Name, h.Typeflag)
		}
		if err := b.take(h.Name, h.Size); err != nil {
			return nil, err
		}
		if !all && !opaReads(h.Name) {
			continue // tr.Next skips it, reading it through without holding it
		}
		data := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, unexpected(err))
		}
		out = append(out, file{path: h.Name, url: strings.TrimSuffix(baseURL, "/") + "/" + strings.TrimPrefix(h.Name, "/"), data: data})
	}
}

// boundedReader fails once more than left bytes are read.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("%w: more bytes once decompressed than its bound allows (--max-bundle-bytes)", ErrTooLarge)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// unexpected names a stream that ended early as such.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// digest is the SHA-256 of a bundle's files, path and content, in path
// order: the same content gives the same digest however it is packed.
func digest(files []file) string {
	sorted := make([]file, len(files))
	copy(sorted, files)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].path < sorted[j].path })
	h := sha256.New()
	for _, f := range sorted {
		fmt.Fprintf(h, "%s\x00%d\x00", f.path, len(f.data))
		h.Write(f.data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// filesLoader hands files already read to OPA's bundle reader.
type filesLoader struct {
	files []file
	next  int
}

func (l *filesLoader) NextFile() (*bundle.Descriptor, error) {
	if l.next >= len(l.files) {
		return nil, io.EOF
	}
	f := l.files[l.next]
	l.next++
	return bundle.NewDescriptor(f.url, f.path, bytes.NewBuffer(f.data)), nil
}

// The loader's options are OPA's tuning for its own loaders; the files
// here are already read, bounded and filtered.
func (l *filesLoader) WithFilter(filter.LoaderFilter) bundle.DirectoryLoader   { return l }
func (l *filesLoader) WithPathFormat(bundle.PathFormat) bundle.DirectoryLoader { return l }
func (l *filesLoader) WithSizeLimitBytes(int64) bundle.DirectoryLoader         { return l }
func (l *filesLoader) WithFollowSymlinks(bool) bundle.DirectoryLoader          { return l }

package bundles

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// MaxBytes bounds one file of a bundle; Limits bound the whole.
const MaxBytes = 64 << 20

// LibraryRoot is the root the policy library owns. A user bundle that claims
// it replaces the whole library.
const LibraryRoot = "toolpdp"

// Bundle is one read bundle and the data files it came from.
type Bundle struct {
	Name      string // the --bundle argument, or "library" / "default"
	Bundle    *bundle.Bundle
	DataFiles []string // bundle-relative paths of data.json / data.yaml files
}

// Revision is the bundle's manifest revision.
func (b *Bundle) Revision() string { return b.Bundle.Manifest.Revision }

// IsUser reports whether the bundle is one of the --bundle arguments, not
// the embedded library or default agent.
func (b *Bundle) IsUser() bool { return b.Name != "library" && b.Name != "default" }

// IsUserFile reports whether a module file belongs to a user bundle.
func IsUserFile(bundles []*Bundle, file string) bool {
	for _, b := range bundles {
		for _, m := range b.Bundle.Modules {
			if m.Path == file {
				return b.IsUser()
			}
		}
	}
	return false
}

// ReadPath reads a bundle directory or an `opa build` .tar.gz within the
// default Limits. With vc set, the bundle must carry a valid
// .signatures.json.
func ReadPath(p string, vc *bundle.VerificationConfig) (*Bundle, error) {
	return readPath(p, p, vc, Limits{})
}

func readPath(name, p string, vc *bundle.VerificationConfig, lim Limits) (*Bundle, error) {
	files, err := collect(p, readsAll(vc), lim)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", name, err)
	}
	return readBundle(name, &filesLoader{files: files}, vc)
}

// collect reads the files of a bundle directory or tarball, bounded.
func collect(p string, all bool, lim Limits) ([]file, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return readDir(p, lim, all)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a directory or a .tar.gz bundle", kindOf(info.Mode()))
	}
	return readTarball(f, p, lim, all)
}

// ReadFS reads a bundle from a file system (the embedded library).
func ReadFS(name string, fsys fs.FS) (*Bundle, error) {
	l, err := bundle.NewFSLoader(fsys)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", name, err)
	}
	return readBundle(name, l, nil)
}

func readBundle(name string, l bundle.DirectoryLoader, vc *bundle.VerificationConfig) (*Bundle, error) {
	b, err := readFiles(l, vc)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", name, err)
	}
	b.Name = name
	return b, nil
}

// readFiles reads a bundle with OPA's reader (Rego v1, signatures when vc
// is set) and gives it its roots.
func readFiles(l bundle.DirectoryLoader, vc *bundle.VerificationConfig) (*Bundle, error) {
	rec := &recordingLoader{DirectoryLoader: l}
	r := bundle.NewCustomReader(rec).
		WithRegoVersion(ast.RegoV1).
		WithSizeLimitBytes(MaxBytes).
		WithSkipBundleVerification(vc == nil)
	if vc != nil {
		r = r.WithBundleVerificationConfig(vc)
	}
	b, err := r.Read()
	if err != nil {
		return nil, err
	}
	sort.Strings(rec.dataFiles)
	inferRoots(&b)
	return &Bundle{Bundle: &b, DataFiles: rec.dataFiles}, nil
}

// recordingLoader notes the data files a bundle reads, so that an invalid
// agent definition can be reported with the file it came from.
type recordingLoader struct {
	bundle.DirectoryLoader
	dataFiles []string
}

func (r *recordingLoader) NextFile() (*bundle.Descriptor, error) {
	d, err := r.DirectoryLoader.NextFile()
	if err == nil {
		p := "/" + strings.TrimPrefix(d.Path(), "/")
		switch path.Base(p) {
		case "data.json", "data.yaml", "data.yml":
			r.dataFiles = append(r.dataFiles, strings.TrimPrefix(p, "/"))
		}
	}
	return d, err
}

// DataFileOf names the file that defines data at the given path: the data
// file deepest in the bundle whose directory contains or lies under it.
func (b *Bundle) DataFileOf(dataPath ...string) string {
	want := strings.Join(dataPath, "/")
	best, bestDepth := "", -1
	for _, f := range b.DataFiles {
		dir := path.Dir(f)
		if dir == "." {
			dir = ""
		}
		inside := dir == "" || want == dir || strings.HasPrefix(want, dir+"/") || strings.HasPrefix(dir, want+"/")
		if depth := len(dir); inside && depth > bestDepth {
			best, bestDepth = f, depth
		}
	}
	if best == "" {
		return b.Name
	}
	return path.Join(b.Name, best)
}

// inferRoots gives a bundle whose manifest names no roots the roots of what
// it holds: its top-level data keys and its packages' first segments. OPA
// would give it the root "" (everything), which overlaps the library's.
// Every bundle this package reads, or downloads, gets its roots here, once.
func inferRoots(b *bundle.Bundle) {
	if b.Manifest.Roots != nil && !(len(*b.Manifest.Roots) == 1 && (*b.Manifest.Roots)[0] == "") {
		return
	}
	seen := map[string]bool{}
	for k := range b.Data {
		seen[k] = true
	}
	for _, m := range b.Modules {
		if m.Parsed == nil || len(m.Parsed.Package.Path) < 2 {
			continue
		}
		if s, ok := m.Parsed.Package.Path[1].Value.(ast.String); ok {
			seen[string(s)] = true
		}
	}
	roots := make([]string, 0, len(seen))
	for k := range seen {
		roots = append(roots, k)
	}
	sort.Strings(roots)
	b.Manifest.Roots = &roots
}

// claims reports whether the bundle's roots include or lie under root.
func claims(b *bundle.Bundle, root string) bool {
	if b.Manifest.Roots == nil {
		return false
	}
	for _, r := range *b.Manifest.Roots {
		if r == root || strings.HasPrefix(r, root+"/") {
			return true
		}
	}
	return false
}

// replacesLibrary is true for a bundle whose roots are exactly the library's:
// it brings its own toolpdp.* packages and tables, and the embedded library is
// not loaded.
func replacesLibrary(b *bundle.Bundle) bool {
	if b.Manifest.Roots == nil {
		return false
	}
	for _, r := range *b.Manifest.Roots {
		if r == LibraryRoot {
			return true
		}
	}
	return false
}

// Merge combines bundles into one, with OPA's checks that roots do not
// overlap and that every file lies under its bundle's roots.
func Merge(bundles []*Bundle) (*bundle.Bundle, error) {
	bs := make([]*bundle.Bundle, len(bundles))
	for i, b := range bundles {
		bs[i] = b.Bundle
	}
	m, err := bundle.MergeWithRegoVersion(bs, ast.RegoV1, false)
	if err != nil {
		names := make([]string, len(bundles))
		for i, b := range bundles {
			names[i] = fmt.Sprintf("%s (roots %v)", b.Name, *b.Bundle.Manifest.Roots)
		}
		return nil, fmt.Errorf("bundles %s cannot be combined: %w", strings.Join(names, ", "), err)
	}
	return m, nil
}

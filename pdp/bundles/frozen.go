package bundles

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// Frozen is the sources' content at one moment, as the files read: what a
// load in another process is handed, so that it loads exactly the content
// this process hashed, downloads included, without reading anything again.
type Frozen struct {
	Hash    string // as Sources.Hash gives it for the same content
	Bundles []FrozenBundle
}

// FrozenBundle is one --bundle argument's files.
type FrozenBundle struct {
	Path  string
	Files []FrozenFile
}

// FrozenFile is one file of a bundle, as OPA's reader names it.
type FrozenFile struct {
	Path, URL string
	Data      []byte
}

// Freeze reads every source once (bounded, as Read reads them) and takes
// every download's files. A bundle server not downloaded yet is
// ErrNotDownloaded, as for Read.
func (s *Sources) Freeze() (*Frozen, error) {
	f := &Frozen{}
	h := sha256.New()
	for _, p := range s.Paths {
		var files []file
		if IsRemote(p) {
			s.mu.Lock()
			r := s.remote[p]
			var failed error
			var sum string
			if r != nil {
				files, failed, sum = r.files, r.everErr, r.digest
			}
			s.mu.Unlock()
			if files == nil {
				if failed != nil {
					return nil, fmt.Errorf("bundle %s: %w: %w", DisplayName(p), ErrNotDownloaded, failed)
				}
				return nil, fmt.Errorf("bundle %s: %w", DisplayName(p), ErrNotDownloaded)
			}
			fmt.Fprintf(h, "%s\x00%s\x00", p, sum)
		} else {
			var err error
			if files, err = collect(resolveMount(p), readsAll(s.Verify), s.Limits); err != nil {
				return nil, fmt.Errorf("bundle %s: %w", p, err)
			}
			fmt.Fprintf(h, "%s\x00%s\x00", p, digest(files))
		}
		fb := FrozenBundle{Path: p, Files: make([]FrozenFile, len(files))}
		for i, x := range files {
			fb.Files[i] = FrozenFile{Path: x.path, URL: x.url, Data: x.data}
		}
		f.Bundles = append(f.Bundles, fb)
	}
	f.Hash = hex.EncodeToString(h.Sum(nil))
	return f, nil
}

// Read reads the frozen bundles as Sources.Read reads the sources, the
// embedded library and default agent added. With vc set, signatures are
// checked again.
func (f *Frozen) Read(vc *bundle.VerificationConfig) ([]*Bundle, error) {
	users := make([]*Bundle, 0, len(f.Bundles))
	paths := make([]string, 0, len(f.Bundles))
	for _, fb := range f.Bundles {
		files := make([]file, len(fb.Files))
		for i, x := range fb.Files {
			files[i] = file{path: x.Path, url: x.URL, data: x.Data}
		}
		b, err := readBundle(DisplayName(fb.Path), &filesLoader{files: files}, vc)
		if err != nil {
			return nil, err
		}
		users = append(users, b)
		paths = append(paths, fb.Path)
	}
	return withEmbedded(paths, users)
}

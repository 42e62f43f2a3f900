package bundles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/testkit"
)

const guard = "package guardrails.x\n\nimport rego.v1\n\ndeny contains \"no\" if false\n"

// What a bundle directory may not hold is a rejected read naming the
// file — at once, never a read that blocks (a FIFO) or never ends
// (/dev/zero) — for the hash that decides a reload and the read alike.
func TestReadDirRefusesWhatIsNotARegularFile(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.rego")
	if err := os.WriteFile(outside, []byte(guard), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, file, want string
		make             func(p string) error
	}{
		{"fifo", "guardrails/x/pipe.rego", "named pipe", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"fifo ignored by OPA", "notes.txt", "named pipe", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"device", "zero.rego", "out of the bundle", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"symlink out", "guardrails/x/out.rego", "out of the bundle", func(p string) error { return os.Symlink(outside, p) }},
		{"dangling", "gone.rego", "leads nowhere", func(p string) error { return os.Symlink("/nonexistent/x", p) }},
		{"symlinked dir", "more", "symlink to a directory", func(p string) error { return os.Symlink(filepath.Dir(p)+"/guardrails", p) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := testkit.WriteBundle(t, map[string]string{"guardrails/x/x.rego": guard})
			if err := c.make(filepath.Join(dir, c.file)); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 2)
			go func() {
				_, err := (&Sources{Paths: []string{dir}}).Hash()
				done <- err
				_, err = (&Sources{Paths: []string{dir}}).Read()
				done <- err
			}()
			for _, step := range []string{"Hash", "Read"} {
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.want) {
						t.Errorf("%s: %v, want an error naming %s: %s", step, err, c.file, c.want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s did not return", step)
				}
			}
		})
	}
	// A symlink to a file inside the bundle is read as that file.
	dir := testkit.WriteBundle(t, map[string]string{"real/x.rego": guard})
	if err := os.Symlink(filepath.Join(dir, "real/x.rego"), filepath.Join(dir, "link.rego")); err != nil {
		t.Fatal(err)
	}
	b, err := ReadPath(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b.Bundle.Modules); n != 2 {
		t.Errorf("%d modules, want the file and its link", n)
	}
}

// The bound is on the whole bundle: many small files OPA ignores count as
// surely as one big one, in a directory and in a tarball.
func TestBundleBoundCountsEveryFile(t *testing.T) {
	files := map[string]string{"guardrails/x/x.rego": guard}
	for i := range 40 {
		files[filepath.Join("docs", strings.Repeat("n", i+1)+".txt")] = strings.Repeat("x", 1000)
	}
	dir := testkit.WriteBundle(t, files)
	small := Limits{MaxBytes: 20000}
	s := &Sources{Paths: []string{dir}, Limits: small}
	if _, err := s.Read(); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "--max-bundle-bytes") {
		t.Errorf("directory: %v", err)
	}
	if _, err := s.Hash(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("directory hash: %v", err)
	}
	if _, err := (&Sources{Paths: []string{dir}, Limits: Limits{MaxEntries: 10}}).Read(); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "--max-bundle-entries") {
		t.Errorf("directory entries: %v", err)
	}
	if _, err := (&Sources{Paths: []string{dir}}).Read(); err != nil {
		t.Errorf("within the default bound: %v", err)
	}

	tgz := filepath.Join(t.TempDir(), "b.tar.gz")
	if err := os.WriteFile(tgz, tarGz(t, files), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Sources{Paths: []string{tgz}, Limits: small}).Read(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("tarball: %v", err)
	}
	if _, err := (&Sources{Paths: []string{tgz}}).Read(); err != nil {
		t.Errorf("tarball within the default bound: %v", err)
	}
}

// A tarball holds regular files and directories; a link or a device entry
// is refused by name.
func TestTarballRefusesLinks(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	_ = tw.WriteHeader(&tar.Header{Name: "/evil.rego", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"})
	tw.Close()
	gz.Close()
	if _, err := readTarball(&buf, "", Limits{}, false); err == nil || !strings.Contains(err.Error(), "/evil.rego") {
		t.Errorf("a symlink entry: %v", err)
	}
}

// The same content packed twice (another gzip header, another order) has
// one digest.
func TestDigestIsOfContent(t *testing.T) {
	a, err := readTarball(bytes.NewReader(tarGz(t, map[string]string{"a.rego": guard, "b/data.json": "{}"})), "", Limits{}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readTarball(bytes.NewReader(tarGz(t, map[string]string{"b/data.json": "{}", "a.rego": guard})), "", Limits{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if digest(a) != digest(b) {
		t.Error("one content, two digests")
	}
}

func tarGz(t *testing.T, files map[string]string) []byte { return testkit.Tarball(t, files) }

// What the tar reader reads without returning an entry — here PAX headers
// by the thousand — is bounded too; a PAX global header (git archive's
// commit id) is no entry of the bundle.
func TestTarballMetadataIsBounded(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "abc123"}})
	body := []byte(guard)
	_ = tw.WriteHeader(&tar.Header{Name: "/g/x.rego", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write(body)
	tw.Close()
	gz.Close()
	if files, err := readTarball(bytes.NewReader(buf.Bytes()), "", Limits{}, false); err != nil || len(files) != 1 {
		t.Fatalf("a global header: %v, %d files", err, len(files))
	}

	// One PAX header block and its records, without the file header after
	// them, repeated: the reader loops through them returning nothing.
	var one bytes.Buffer
	tw = tar.NewWriter(&one)
	_ = tw.WriteHeader(&tar.Header{Name: "/g/x", Mode: 0o644, Typeflag: tar.TypeReg, PAXRecords: map[string]string{"comment": strings.Repeat("p", 100000)}})
	tw.Flush()
	pax := one.Bytes()[:one.Len()-512]
	buf.Reset()
	gz = gzip.NewWriter(&buf)
	for range 400 {
		gz.Write(pax)
	}
	gz.Write(one.Bytes()[one.Len()-512:])
	gz.Close()
	_, err := readTarball(bytes.NewReader(buf.Bytes()), "", Limits{MaxBytes: 1 << 20, MaxEntries: 10}, false)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%v", err)
	}
}

// No bytes a bundle server sends make the reader panic, hold more than the
// bound, or return files over it.
func FuzzReadTarball(f *testing.F) {
	f.Add(testkit.Tarball(f, map[string]string{".manifest": `{"revision": "x"}`, "guardrails/x/x.rego": guard}))
	f.Add(testkit.Tarball(f, map[string]string{"a/data.json": "{}", "notes.txt": "hello"}))
	f.Add([]byte("not a tarball"))
	f.Fuzz(func(t *testing.T, body []byte) {
		lim := Limits{MaxBytes: 4096, MaxEntries: 16}
		files, err := readTarball(bytes.NewReader(body), "", lim, false)
		if err != nil {
			return
		}
		var total int
		for _, f := range files {
			total += len(f.data)
		}
		if total > 4096 || len(files) > 16 {
			t.Fatalf("%d files, %d bytes past the bound", len(files), total)
		}
	})
}

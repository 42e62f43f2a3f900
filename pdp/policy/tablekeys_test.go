package policy

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/rego"
)

// The tables only Rego reads are the ones the library's sources name: a
// key the library reads that the list lacks would be refused in every
// bundle, and a key in the list no source reads would be accepted and do
// nothing.
func TestRegoTableKeys(t *testing.T) {
	read := map[string]bool{}
	ref := regexp.MustCompile(`\btables\.([a-z_]+)`)
	err := fs.WalkDir(rego.Library(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") || strings.HasSuffix(p, "_test.rego") {
			return err
		}
		b, err := fs.ReadFile(rego.Library(), p)
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			read[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range regoTableKeys {
		if !read[k] {
			t.Errorf("regoTableKeys has %q, which no library source reads", k)
		}
	}
	for k := range read {
		if len(unknownTableKeys(map[string]any{k: nil})) > 0 {
			t.Errorf("the library reads toolpdp.tables.%s, which is not a known table", k)
		}
	}
	if !slices.IsSorted(regoTableKeys) {
		t.Error("regoTableKeys: keep it sorted")
	}
}

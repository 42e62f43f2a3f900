package bundles

import (
	"reflect"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
)

// A bundle without manifest roots gets the roots of what it holds, once,
// as it is read; its data files are remembered for error messages.
func TestReadInfersRoots(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/coder/data.json": `{"tools": []}`,
		"guardrails/x/x.rego":    "package guardrails.x\n\nimport rego.v1\n\ndeny contains \"no\" if false\n",
	})
	b, err := ReadPath(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if roots := *b.Bundle.Manifest.Roots; !reflect.DeepEqual(roots, []string{"agents", "guardrails"}) {
		t.Errorf("roots = %v", roots)
	}
	if got := b.DataFileOf("agents", "coder"); got != dir+"/agents/coder/data.json" {
		t.Errorf("DataFileOf(agents, coder) = %q", got)
	}
	if !b.IsUser() || IsRemote(dir) || !IsRemote("https://example.com/b.tar.gz") {
		t.Error("a path bundle is a user's, and not remote")
	}
}

// Without user bundles the embedded library and default agent are read;
// a user bundle reaching into the library's root is refused.
func TestSourcesRead(t *testing.T) {
	bs, err := (&Sources{}).Read()
	if err != nil || len(bs) != 2 || bs[0].Name != "library" || bs[1].Name != "default" {
		t.Fatalf("%v, %v", bs, err)
	}
	evil := testkit.WriteBundle(t, map[string]string{".manifest": `{"roots": ["toolpdp/permission"]}`,
		"x.rego": "package toolpdp.permission\n\nimport rego.v1\n\nx := 1\n"})
	if _, err := (&Sources{Paths: []string{evil}}).Read(); err == nil {
		t.Fatal("a bundle reaching into toolpdp was read")
	}
}

package policy

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A rules object is decoded with every entry in canonical form and
// otherwise filled in, and encodes back as the definition wrote it, so a
// pinned definition keeps its rules across a durable store.
func TestNetworkRulesDecodeCanonical(t *testing.T) {
	defs := map[string]Definition{}
	_, err := validateAgents(agentsBundle(t, `{"n": {"execution_policy": {"network":
		{"allow": ["Proxy.Golang.org.", "*.NPMJS.org:443", "2130706433:8080", {"host": "DB.corp.internal:5432", "private": true}], "ask": ["Bücher.example"], "deny": ["[::ffff:a00:1]"]}}}}`),
		nil, defs, false)
	if err != nil {
		t.Fatal(err)
	}
	p := defs["n"].Policy
	want := &NetRules{Allow: []string{"proxy.golang.org", "*.npmjs.org:443", "127.0.0.1:8080", "db.corp.internal:5432"}, Ask: []string{"xn--bcher-kva.example"},
		Deny: []string{"10.0.0.1"}, Otherwise: "deny", Private: []string{"db.corp.internal:5432"}}
	if p == nil || p.Network != NetworkRules || !reflect.DeepEqual(p.NetRules, want) {
		t.Fatalf("decoded %+v, want rules %+v", p, want)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back ExecutionPolicy
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if !reflect.DeepEqual(&back, p) {
		t.Errorf("round trip: %s decodes to %+v", raw, back)
	}
	for _, word := range []string{"none", "any"} {
		var q ExecutionPolicy
		if err := json.Unmarshal([]byte(`{"network": "`+word+`"}`), &q); err != nil || q.Network != word || q.NetRules != nil {
			t.Errorf("network %q: %+v, %v", word, q, err)
		}
	}
}

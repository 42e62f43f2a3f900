package tooldef

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// What Canonical accepts, encoding/json reads as the same value; its
// output is its own canonical form.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":[1,2.5,-0,1e300],"a":"\u00e9\ud83d\ude00"}`, `[]`, `"x"`, `{"":null,"\r":true}`, `1E-7`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonical(in)
		if err != nil {
			return
		}
		again, err := Canonical(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Canonical(%q) = %q, not canonical itself (%q, %v)", in, out, again, err)
		}
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatalf("Canonical accepted %q, which encoding/json refuses: %v", in, err)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("Canonical(%q) = %q, not JSON: %v", in, out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("Canonical(%q) = %q: another value", in, out)
		}
	})
}

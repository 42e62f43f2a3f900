package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeRefuses(t *testing.T) {
	for _, c := range []struct {
		in, path, reason string
	}{
		{`{"name":"a","name":"b"}`, "name", `the key "name" appears twice`},
		{`{"name":"get-env","NAME":"echo"}`, "NAME", `the key "NAME" equals the key "name" ignoring case`},
		{`{"params":{"arguments":{"x":1},"ARGUMENTS":{}}}`, "params.ARGUMENTS", "ignoring case"},
		{`{"a":[{"k":1},{"k":1,"\u212a":2}]}`, `a[1]."K"`, `equals the key "k"`}, // the Kelvin sign folds to k
		{`{"ſ":1,"S":2}`, "S", "ignoring case"},                                  // long s folds to s
		{"{\"a\":\"\xff\"}", "", "not valid UTF-8 (at byte 6)"},
		{`{"a":"\ud800"}`, "", "lone UTF-16 surrogate"},
		{`{"a":"\udc00\ud800"}`, "", "lone UTF-16 surrogate"},
		{`{"a":1} {"b":2}`, "", "data after the JSON value"},
		{`{"a":1}x`, "", "data after the JSON value"},
		{`{"a":`, "a", "not JSON"},
		{`{"a.b":{"c":1,"C":2}}`, `"a.b".C`, "ignoring case"},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), strings.Repeat("[0]", MaxDepth), "nested deeper"},
	} {
		_, err := Decode([]byte(c.in))
		var se *Error
		if !errors.As(err, &se) || se.Path != c.path || !strings.Contains(se.Reason, c.reason) {
			t.Errorf("Decode(%.60q) = %v: want an error at %q saying %q", c.in, err, c.path, c.reason)
		}
		if cerr := Check([]byte(c.in)); fmt.Sprint(cerr) != fmt.Sprint(err) {
			t.Errorf("Check(%.60q) = %v, Decode says %v", c.in, cerr, err)
		}
	}
}

func TestDecodeKeeps(t *testing.T) {
	v, err := Decode([]byte(` {"n":12345678901234567890123,"f":1.50e+3,"s":"\ud83d\ude00<>","a":[],"o":{},"b":true,"z":null,"name":1,"Nam":2} `))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": json.Number("12345678901234567890123"), "f": json.Number("1.50e+3"), "s": "😀<>",
		"a": []any{}, "o": map[string]any{}, "b": true, "z": nil, "name": json.Number("1"), "Nam": json.Number("2")}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("Decode = %#v\nwant %#v", v, want)
	}
	if err := Check([]byte(`"just a string"`)); err != nil {
		t.Errorf("a string: %v", err)
	}
}

func TestFoldMatchesEqualFold(t *testing.T) {
	words := []string{"k", "K", "\u212a", "s", "S", "ſ", "ß", "ẞ", "σ", "Σ", "ς", "i", "I", "İ", "ı", "name", "NAME", "NaMe", "µ", "Μ", "μ"}
	for _, a := range words {
		for _, b := range words {
			if (Fold(a) == Fold(b)) != strings.EqualFold(a, b) {
				t.Errorf("%q %q: Fold equal %v, EqualFold %v", a, b, Fold(a) == Fold(b), strings.EqualFold(a, b))
			}
		}
	}
}

// FuzzCheck: Check and Decode agree, and what either accepts is JSON
// encoding/json accepts, with the same value.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{`{"a":1}`, `{"a":1,"A":2}`, `[1,"x",{"k":null}]`, `"\ud83d\ude00"`, `{"a":"\ud800"}`, `1e999`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data)
		if cerr := Check(data); fmt.Sprint(cerr) != fmt.Sprint(err) {
			t.Fatalf("Check %v, Decode %v", cerr, err)
		}
		if err != nil {
			return
		}
		var std any
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.UseNumber()
		if err := dec.Decode(&std); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(v, std) {
			t.Fatalf("%q: Decode %#v, encoding/json %#v", data, v, std)
		}
	})
}

package netrules

import (
	"net/netip"
	"testing"
)

func TestParseHostSpellings(t *testing.T) {
	for in, want := range map[string]string{
		"EVIL.example.":    "evil.example",
		"Bücher.example":   "xn--bcher-kva.example",
		"2130706433":       "127.0.0.1",
		"0x7f.1":           "127.0.0.1",
		"0177.0.0.1":       "127.0.0.1",
		"127.1":            "127.0.0.1",
		"[::ffff:7f00:1]":  "127.0.0.1",
		"::1":              "::1",
		"[fd00:ec2::254]":  "fd00:ec2::254",
		"169.254.169.254.": "169.254.169.254",
	} {
		h, err := ParseHost(in)
		if err != nil {
			t.Errorf("ParseHost(%q): %v", in, err)
			continue
		}
		if h.String() != want {
			t.Errorf("ParseHost(%q) = %q, want %q", in, h, want)
		}
	}
	for _, bad := range []string{"", "a..b", "1.2.3.4.5", "256.1.1.1", "exa mple.com", "a/b", "[1.2.3.4]", "x.09"} {
		if h, err := ParseHost(bad); err == nil {
			t.Errorf("ParseHost(%q) = %v, want an error", bad, h)
		}
	}
}

func TestParseEntries(t *testing.T) {
	for in, want := range map[string]string{
		"Proxy.Golang.org":    "proxy.golang.org",
		"*.npmjs.org:443":     "*.npmjs.org:443",
		"127.0.0.1:8080":      "127.0.0.1:8080",
		"10.0.0.0/8":          "10.0.0.0/8",
		"[fd00::/8]:443":      "[fd00::/8]:443",
		"fd00::/8":            "fd00::/8",
		"[::1]:22":            "[::1]:22",
		"::ffff:10.0.0.0/104": "10.0.0.0/8",
	} {
		e, err := ParseEntry(in)
		if err != nil {
			t.Errorf("ParseEntry(%q): %v", in, err)
			continue
		}
		if e.Text != want {
			t.Errorf("ParseEntry(%q).Text = %q, want %q", in, e.Text, want)
		}
	}
	for _, bad := range []string{"", "host:0", "host:70000", "host:x", "*.10.0.0.1", "10.0.0.1/8", "[::1", "[::1]x", "a b"} {
		if e, err := ParseEntry(bad); err == nil {
			t.Errorf("ParseEntry(%q) = %+v, want an error", bad, e)
		}
	}
	if _, err := Parse(nil, nil, nil, "allow"); err == nil {
		t.Error(`otherwise "allow" was accepted`)
	}
}

func TestDecideOrder(t *testing.T) {
	r, err := Parse([]string{"proxy.golang.org", "*.npmjs.org:443", "10.0.0.0/8", "evil.example"}, []string{"github.com"}, []string{"evil.example"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host   string
		port   int
		effect string
		rule   string
	}{
		{"proxy.golang.org", 443, "allow", "allow[0]"},
		{"registry.npmjs.org", 443, "allow", "allow[1]"},
		{"registry.npmjs.org", 80, "deny", "otherwise"},
		{"npmjs.org", 443, "deny", "otherwise"},
		{"github.com", 22, "ask", "ask[0]"},
		{"EVIL.example.", 443, "deny", "deny[0]"},
		{"167772161", 5432, "allow", "allow[2]"},
		{"example.org", 443, "deny", "otherwise"},
	} {
		h, err := ParseHost(c.host)
		if err != nil {
			t.Fatal(err)
		}
		if m := r.Decide(h, c.port); m.Effect != c.effect || m.Rule != c.rule {
			t.Errorf("%s:%d: %+v, want %s by %s", c.host, c.port, m, c.effect, c.rule)
		}
	}
	if !r.NamesAddress(netip.MustParseAddr("::ffff:10.1.2.3"), 1) || r.NamesAddress(netip.MustParseAddr("127.0.0.1"), 1) {
		t.Error("NamesAddress reads the allow list's ranges wrongly")
	}
}

// A private name entry may reach the refused ranges for the names it
// matches; private goes with names of allow or ask only.
func TestPrivateEntries(t *testing.T) {
	r, err := Parse([]string{"DB.corp.internal:5432", "api.test"}, []string{"*.lab.internal"}, nil, "", "db.corp.internal:5432", "*.lab.internal")
	if err != nil {
		t.Fatal(err)
	}
	loop := netip.MustParseAddr("10.0.0.5")
	for host, want := range map[string]bool{"db.corp.internal": true, "x.lab.internal": true, "api.test": false} {
		h, _ := ParseHost(host)
		port := 5432
		if got := r.MayReachRefused(h, loop, port); got != want {
			t.Errorf("%s:%d may reach %s: %v, want %v", host, port, loop, got, want)
		}
	}
	if got := r.Private(); len(got) != 2 || got[0] != "db.corp.internal:5432" {
		t.Errorf("Private() = %q", got)
	}
	for _, bad := range [][]string{{"10.0.0.0/8"}, {"other.test"}} {
		if _, err := Parse([]string{"10.0.0.0/8", "api.test"}, nil, nil, "", bad...); err == nil {
			t.Errorf("private %q was accepted", bad)
		}
	}
}

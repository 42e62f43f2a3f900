package netproxy

import (
	"net/netip"
	"strings"
	"testing"
)

// The refused table holds each range in every IPv6 spelling that carries
// an IPv4 address, and nothing public.
func TestRefusedRanges(t *testing.T) {
	table, err := loadRefused(refusedJSON)
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{
		"169.254.169.254":        "cloud metadata",
		"fd00:ec2::254":          "cloud metadata",
		"::ffff:169.254.169.254": "cloud metadata",
		"::a9fe:a9fe":            "cloud metadata service (the IPv4-compatible form",
		"64:ff9b::a9fe:a9fe":     "cloud metadata service (the NAT64 form",
		"2002:a9fe:a9fe::1":      "cloud metadata service (the 6to4 form",
		"2002:7f00:1::":          "loopback (the 6to4 form",
		"100.64.1.1":             "carrier-grade NAT",
		"0.0.0.0":                "this network",
		"10.9.8.7":               "private",
		"::ffff:192.168.1.1":     "private",
		"::1":                    "loopback",
		"fe80::1":                "link-local",
		"fec0::1":                "site-local",
		"fc00::1":                "unique-local",
		"2001:0:4136:e378::1":    "Teredo",
		"127.0.0.53":             "loopback",
		"fe80::1%eth0":           "link-local",
		"64:ff9b::808:808":       "",
		"8.8.8.8":                "",
		"2606:4700:4700::1111":   "",
		"2002:808:808::1":        "",
		"::ffff:1.1.1.1":         "",
	} {
		got := table.refused(netip.MustParseAddr(addr))
		if want == "" && got != "" || want != "" && !strings.HasPrefix(got, want) {
			t.Errorf("%s: refused as %q, want %q", addr, got, want)
		}
	}
}

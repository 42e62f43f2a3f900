package netproxy

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/netip"
)

// refusedJSON is the table of address ranges no connection reaches unless
// an allow entry names the address: data, so that a range is added by
// editing a list, and a reviewer reads the whole policy in one place.
//
//go:embed refused.json
var refusedJSON []byte

type refusedRange struct {
	prefix netip.Prefix
	why    string
}

type embeddedForm struct {
	prefix netip.Prefix
	form   string
	offset int // the byte of the IPv6 address the IPv4 address starts at
}

// refusedTable is the parsed table.
type refusedTable struct {
	ranges []refusedRange
	forms  []embeddedForm
}

func loadRefused(raw []byte) (*refusedTable, error) {
	var doc struct {
		Ranges []struct {
			CIDR string `json:"cidr"`
			Why  string `json:"why"`
		} `json:"ranges"`
		Embedded []struct {
			CIDR   string `json:"cidr"`
			Form   string `json:"form"`
			Offset int    `json:"offset"`
		} `json:"embedded_ipv4"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("refused.json: %w", err)
	}
	t := &refusedTable{}
	for i, r := range doc.Ranges {
		p, err := netip.ParsePrefix(r.CIDR)
		if err != nil || r.Why == "" {
			return nil, fmt.Errorf("refused.json: ranges[%d]: %q is not a CIDR with a reason", i, r.CIDR)
		}
		t.ranges = append(t.ranges, refusedRange{p, r.Why})
	}
	for i, e := range doc.Embedded {
		p, err := netip.ParsePrefix(e.CIDR)
		if err != nil || !p.Addr().Is6() || e.Offset < 0 || e.Offset > 12 {
			return nil, fmt.Errorf("refused.json: embedded_ipv4[%d]: %q with offset %d is not an IPv6 CIDR carrying an IPv4 address", i, e.CIDR, e.Offset)
		}
		t.forms = append(t.forms, embeddedForm{p, e.Form, e.Offset})
	}
	return t, nil
}

// refused says why addr is in a refused range ("" when it is not): the
// address itself, or the IPv4 address an IPv6 form carries.
func (t *refusedTable) refused(addr netip.Addr) string {
	addr = addr.WithZone("")
	if why := t.lookup(addr.Unmap()); why != "" {
		return why
	}
	if !addr.Is6() || addr.Is4In6() {
		return ""
	}
	b := addr.As16()
	for _, f := range t.forms {
		if f.prefix.Contains(addr) {
			v4 := netip.AddrFrom4([4]byte(b[f.offset : f.offset+4]))
			if why := t.lookup(v4); why != "" {
				return fmt.Sprintf("%s (the %s form of %s)", why, f.form, v4)
			}
		}
	}
	return ""
}

func (t *refusedTable) lookup(addr netip.Addr) string {
	for _, r := range t.ranges {
		if r.prefix.Contains(addr) {
			return r.why
		}
	}
	return ""
}

// Package netrules reads and decides an execution policy's network rules:
// which hosts a confined run may connect to, may ask about, or may not.
//
// A host is read the way a URL's host is read (an IPv6 address in brackets,
// numeric IPv4 spellings such as 2130706433 or 0x7f.1 are addresses), and a
// name is compared in one canonical form — IDNA, lower case, no trailing
// dot — so that two spellings of one host can never be two hosts to the
// rules.
package netrules

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Otherwise values: what a host no entry matches gets.
const (
	Deny = "deny"
	Ask  = "ask"
)

// Entry is one rule entry: a name, *.name, an address or a CIDR, with a
// port or none (any port).
type Entry struct {
	Text     string       // the entry in canonical form, as Resolved lists it
	Name     string       // a name entry's name (for *.name, the name below which)
	Wildcard bool         // *.name: any name below Name, not Name itself
	Prefix   netip.Prefix // an address (a /32 or /128) or a CIDR; invalid for a name
	Port     int          // 0: any port
	Private  bool         // a name entry that may reach the refused address ranges
}

// Rules are parsed network rules.
type Rules struct {
	Allow, Ask, Deny []Entry
	Otherwise        string // Deny or Ask
}

// Host is a host as the rules compare it: a canonical name, or an address.
type Host struct {
	Name string     // lower-cased, IDNA, no trailing dot; "" for an address
	Addr netip.Addr // valid for an address (IPv4-mapped IPv6 unmapped)
}

// String is the host as the decision log and the report show it.
func (h Host) String() string {
	if h.Addr.IsValid() {
		return h.Addr.String()
	}
	return h.Name
}

// IsAddr reports whether the host is an address.
func (h Host) IsAddr() bool { return h.Addr.IsValid() }

// Parse reads rules: every entry must parse, and otherwise is "deny",
// "ask" or "" (deny). private are entries of allow or ask, names only,
// that may reach the refused address ranges. Errors name the list and the
// index.
func Parse(allow, ask, deny []string, otherwise string, private ...string) (*Rules, error) {
	r := &Rules{Otherwise: otherwise}
	switch otherwise {
	case "":
		r.Otherwise = Deny
	case Deny, Ask:
	default:
		return nil, fmt.Errorf("otherwise: %q is not \"deny\" or \"ask\"", otherwise)
	}
	var errs []error
	for _, l := range []struct {
		name string
		in   []string
		out  *[]Entry
	}{{"allow", allow, &r.Allow}, {"ask", ask, &r.Ask}, {"deny", deny, &r.Deny}} {
		for i, s := range l.in {
			e, err := ParseEntry(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: %w", l.name, i, err))
				continue
			}
			*l.out = append(*l.out, e)
		}
	}
	for i, p := range private {
		e, err := ParseEntry(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("private[%d]: %w", i, err))
			continue
		}
		if e.Prefix.IsValid() {
			errs = append(errs, fmt.Errorf("private[%d]: %q: private goes with a name; an address or CIDR entry names its addresses already", i, p))
			continue
		}
		marked := false
		for _, list := range [][]Entry{r.Allow, r.Ask} {
			for j := range list {
				if list[j].Text == e.Text {
					list[j].Private, marked = true, true
				}
			}
		}
		if !marked {
			errs = append(errs, fmt.Errorf("private[%d]: %q is not an entry of allow or ask", i, p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// Private are the canonical texts of the entries marked private.
func (r *Rules) Private() []string {
	var out []string
	for _, e := range slices.Concat(r.Allow, r.Ask) {
		if e.Private && !slices.Contains(out, e.Text) {
			out = append(out, e.Text)
		}
	}
	return out
}

// Resolved are the rules' entries in canonical form, each list in its
// order, and otherwise filled in.
func (r *Rules) Resolved() (allow, ask, deny []string, otherwise string) {
	texts := func(es []Entry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Text
		}
		return out
	}
	return texts(r.Allow), texts(r.Ask), texts(r.Deny), r.Otherwise
}

// ParseEntry reads one entry: NAME, *.NAME, ADDRESS, CIDR, each with an
// optional :PORT; an IPv6 address or CIDR takes a port only in brackets.
func ParseEntry(s string) (Entry, error) {
	if s == "" {
		return Entry{}, errors.New("an empty entry")
	}
	hostPart, port, err := splitPort(s)
	if err != nil {
		return Entry{}, fmt.Errorf("%q: %w", s, err)
	}
	e := Entry{Port: port}
	switch {
	case strings.Contains(hostPart, "/"):
		p, err := netip.ParsePrefix(hostPart)
		if err != nil {
			return Entry{}, fmt.Errorf("%q: not a CIDR: %w", s, err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		if p.Masked() != p {
			return Entry{}, fmt.Errorf("%q: the CIDR has bits set below its mask (did you mean %s?)", s, p.Masked())
		}
		e.Prefix = p
	case strings.HasPrefix(hostPart, "*."):
		h, err := ParseHost(hostPart[2:])
		if err != nil {
			return Entry{}, fmt.Errorf("%q: %w", s, err)
		}
		if h.IsAddr() {
			return Entry{}, fmt.Errorf("%q: *. goes before a name, not an address", s)
		}
		e.Name, e.Wildcard = h.Name, true
	default:
		h, err := ParseHost(hostPart)
		if err != nil {
			return Entry{}, fmt.Errorf("%q: %w", s, err)
		}
		if h.IsAddr() {
			e.Prefix = netip.PrefixFrom(h.Addr, h.Addr.BitLen())
		} else {
			e.Name = h.Name
		}
	}
	e.Text = e.text()
	return e, nil
}

// text is the entry in canonical form.
func (e Entry) text() string {
	var host string
	switch {
	case e.Prefix.IsValid() && e.Prefix.IsSingleIP():
		host = e.Prefix.Addr().String()
	case e.Prefix.IsValid():
		host = e.Prefix.String()
	case e.Wildcard:
		host = "*." + e.Name
	default:
		host = e.Name
	}
	if e.Port == 0 {
		return host
	}
	if e.Prefix.IsValid() && e.Prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(e.Port)
}

// splitPort splits HOST[:PORT]: brackets hold an IPv6 address or CIDR; an
// unbracketed entry with more than one colon is an IPv6 address or CIDR
// without a port.
func splitPort(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, errors.New("a '[' without its ']'")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", 0, fmt.Errorf("%q after ']' is not :PORT", rest)
		}
		p, err := ParsePort(rest[1:])
		return host, p, err
	}
	if strings.Count(s, ":") > 1 {
		return s, 0, nil
	}
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, nil
	}
	p, err := ParsePort(port)
	return host, p, err
}

// ParsePort reads a port: a decimal number from 1 to 65535.
func ParsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > math.MaxUint16 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return n, nil
}

// ParseHost reads a host as a URL's host is read: an IPv6 address (in
// brackets or not), an IPv4 address in any of the spellings URL parsers
// and inet_aton accept, or a name, made canonical.
func ParseHost(s string) (Host, error) {
	if s == "" {
		return Host{}, errors.New("an empty host")
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() {
			return Host{}, fmt.Errorf("%q in brackets is not an IPv6 address", s)
		}
		return addrHost(a)
	}
	if strings.Contains(s, ":") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return Host{}, fmt.Errorf("%q is neither a name nor an address", s)
		}
		return addrHost(a)
	}
	name := strings.TrimSuffix(s, ".")
	if name == "" || strings.HasSuffix(name, ".") {
		return Host{}, fmt.Errorf("%q is not a host name", s)
	}
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil {
		return Host{}, fmt.Errorf("%q is not a valid host name: %v", s, err)
	}
	ascii = strings.ToLower(ascii)
	labels := strings.Split(ascii, ".")
	if numericLabel(labels[len(labels)-1]) {
		// A host whose last label is a number is an IPv4 address, or no
		// host at all: URL parsers never read it as a name.
		a, ok := parseIPv4(labels)
		if !ok {
			return Host{}, fmt.Errorf("%q ends in a number but is not an IPv4 address", s)
		}
		return addrHost(a)
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return Host{}, fmt.Errorf("%q has an empty or over-long label", s)
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return Host{}, fmt.Errorf("%q holds %q, which no host name holds", s, c)
			}
		}
	}
	if len(ascii) > 253 {
		return Host{}, fmt.Errorf("%q is longer than a host name may be", s)
	}
	return Host{Name: ascii}, nil
}

func addrHost(a netip.Addr) (Host, error) {
	if a.Zone() != "" {
		return Host{}, fmt.Errorf("%q: an address with a zone is not a host the rules can name", a)
	}
	return Host{Addr: a.Unmap()}, nil
}

// numericLabel reports whether a label is a number as the URL standard's
// IPv4 parser sees one: decimal digits, or 0x followed by hex digits.
func numericLabel(l string) bool {
	if l == "" {
		return false
	}
	if strings.HasPrefix(l, "0x") {
		return strings.Trim(l[2:], "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

// parseIPv4 reads the URL standard's IPv4 spellings: one to four parts,
// each decimal, octal (a leading 0) or hex (0x); the last part fills the
// bytes the others leave.
func parseIPv4(labels []string) (netip.Addr, bool) {
	if len(labels) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(labels))
	for i, l := range labels {
		base, digits := 10, l
		switch {
		case strings.HasPrefix(l, "0x"):
			base, digits = 16, l[2:]
		case len(l) > 1 && l[0] == '0':
			base, digits = 8, l[1:]
		}
		if digits == "" {
			nums[i] = 0
			continue
		}
		n, err := strconv.ParseUint(digits, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v := last
	for i, n := range nums[:len(nums)-1] {
		v |= n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// Match is the entry that decided a host, and how.
type Match struct {
	Effect string // "allow", "ask" or "deny"
	Rule   string // "deny[0]", "allow[2]", "otherwise"
	Entry  string // the entry's canonical text; "" for otherwise
}

// Decide is what the rules say of host:port: deny, then ask, then allow,
// then otherwise; the first matching entry of a list decides.
func (r *Rules) Decide(h Host, port int) Match {
	for _, l := range []struct {
		effect  string
		entries []Entry
	}{{"deny", r.Deny}, {"ask", r.Ask}, {"allow", r.Allow}} {
		for i, e := range l.entries {
			if e.Matches(h, port) {
				return Match{Effect: l.effect, Rule: fmt.Sprintf("%s[%d]", l.effect, i), Entry: e.Text}
			}
		}
	}
	return Match{Effect: r.Otherwise, Rule: "otherwise"}
}

// Matches reports whether the entry names host:port.
func (e Entry) Matches(h Host, port int) bool {
	if e.Port != 0 && e.Port != port {
		return false
	}
	switch {
	case e.Prefix.IsValid():
		return h.IsAddr() && e.Prefix.Contains(h.Addr)
	case e.Wildcard:
		return !h.IsAddr() && strings.HasSuffix(h.Name, "."+e.Name)
	}
	return !h.IsAddr() && h.Name == e.Name
}

// MayReachRefused reports whether host:port may connect to an address of
// the refused ranges: an allow or ask entry names the address (or a range
// holding it), or is a private name entry matching host. An ask entry
// counts: the connection it names is made only once a person allowed it.
func (r *Rules) MayReachRefused(h Host, addr netip.Addr, port int) bool {
	if r.NamesAddress(addr, port) {
		return true
	}
	for _, e := range slices.Concat(r.Allow, r.Ask) {
		if e.Private && e.Matches(h, port) {
			return true
		}
	}
	return false
}

// NamesAddress reports whether an allow or ask entry names addr (an
// address or a range holding it) for port.
func (r *Rules) NamesAddress(addr netip.Addr, port int) bool {
	addr = addr.Unmap()
	for _, e := range slices.Concat(r.Allow, r.Ask) {
		if e.Prefix.IsValid() && (e.Port == 0 || e.Port == port) && e.Prefix.Contains(addr) {
			return true
		}
	}
	return false
}

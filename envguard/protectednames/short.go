package protectednames

import "strings"

// short is the 8.3 short name Windows may give a long name (".git" →
// GIT~1, ".mcp.json" → MCP~1.JSO, or after four collisions MC1A2B~1.JSO):
// base and ext are the name's key without leading dots, split at its last
// dot. valid is false for a name that is its own short name.
type short struct {
	base, ext string
	valid     bool
}

func shortForm(key string) short {
	k := strings.TrimLeft(key, ".")
	if k == "" {
		return short{}
	}
	base, ext := k, ""
	if i := strings.LastIndexByte(k, '.'); i > 0 {
		base, ext = k[:i], k[i+1:]
	}
	base = strings.NewReplacer(".", "", " ", "").Replace(base)
	if len(ext) > 3 {
		ext = ext[:3]
	}
	return short{base: base, ext: ext, valid: base != ""}
}

// matches reports whether key (a segment's Key) could be this short name:
// BASE~N[.EXT], where BASE is a prefix of the name's base or its first two
// characters followed by four hex digits.
func (s short) matches(key string) bool {
	if !s.valid {
		return false
	}
	name, ext, _ := strings.Cut(key, ".")
	base, num, ok := strings.Cut(name, "~")
	if !ok || base == "" || num == "" || len(base)+1+len(num) > 8 || ext != s.ext {
		return false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return false
		}
	}
	if strings.HasPrefix(s.base, base) {
		return true
	}
	if len(base) != 6 || len(s.base) < 2 || base[:2] != s.base[:2] {
		return false
	}
	for _, c := range base[2:] {
		if !strings.ContainsRune("0123456789ABCDEF", c) {
			return false
		}
	}
	return true
}

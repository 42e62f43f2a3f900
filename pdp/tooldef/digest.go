package tooldef

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
)

// Fields are the members of a tool (as tools/list lists it) that its
// digest covers: what the model reads and what shapes its calls. The
// rest (_meta, icons, execution hints) may change without a new digest.
var Fields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// MaxBytes bounds the JSON of one tool's definition as a server lists it:
// a definition is kept in the state store, and a server must not fill it.
const MaxBytes = 64 << 10

// A Tool is one tool's definition, canonical, and its digest.
type Tool struct {
	Name      string
	Canonical []byte // RFC 8785 form of the Fields present (absent ones omitted)
	Digest    string // "sha256:" and the hex SHA-256 of Canonical
}

// Of reads a tool object of a tools/list answer and names its definition.
func Of(raw []byte) (Tool, error) {
	if len(raw) > MaxBytes {
		return Tool{}, fmt.Errorf("the tool's definition is %d bytes, more than the %d kept", len(raw), MaxBytes)
	}
	v, err := Parse(raw)
	if err != nil {
		return Tool{}, fmt.Errorf("the tool's definition: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Tool{}, errors.New("the tool's definition is not a JSON object")
	}
	name, ok := obj["name"].(string)
	if !ok || name == "" {
		return Tool{}, errors.New("the tool's definition has no name")
	}
	kept := map[string]any{}
	for _, f := range Fields {
		if fv, present := obj[f]; present {
			kept[f] = fv
		}
	}
	var b bytes.Buffer
	if err := write(&b, kept); err != nil {
		return Tool{}, fmt.Errorf("tool %q: %w", name, err)
	}
	return Tool{Name: name, Canonical: b.Bytes(), Digest: DigestOf(b.Bytes())}, nil
}

// DigestOf is the digest of a canonical definition.
func DigestOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidDigest reports whether s is written as Digest writes one.
func ValidDigest(s string) bool { return digestRE.MatchString(s) }

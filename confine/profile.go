package confine

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed profile.json
var profileJSON []byte

// Profile is what a confined command may touch besides its scopes: Read
// (read and execute), Write (read and write: /dev/null and friends) and
// Terminal (write plus terminal ioctls). Paths that do not exist are skipped.
type Profile struct {
	Read     []string `json:"read"`
	Write    []string `json:"write"`
	Terminal []string `json:"terminal"`
}

// DefaultProfile is the profile kept as data beside this package.
func DefaultProfile() (Profile, error) {
	var p struct {
		Profile
		Comment string `json:"comment"`
	}
	dec := json.NewDecoder(bytes.NewReader(profileJSON))
	dec.DisallowUnknownFields() // a misspelt key would be a rule nobody applies
	if err := dec.Decode(&p); err != nil {
		return Profile{}, fmt.Errorf("confine/profile.json: %w", err)
	}
	return p.Profile, nil
}

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolpdp/toolpdp/confine"
)

// confinementCheck is what `toolpdp exec --check` found: whether a
// confined run works here, what the kernel and node allow, and what a run
// could not enforce.
type confinementCheck struct {
	Available bool           `json:"available"`
	Kernel    confine.Kernel `json:"kernel"`
	Missing   []string       `json:"missing,omitempty"`
	Error     string         `json:"error,omitempty"`
}

// checkConfinement runs `true` confined to a scratch directory, with every
// part an agent's execution asks for — write and read scopes, a protected
// name kept read-only and one masked, no network — and says whether that
// run started and succeeded: a machine that can confine this can confine
// an allowed call, and one that cannot is told so, never run unconfined.
func checkConfinement() confinementCheck {
	var c confinementCheck
	dir, err := os.MkdirTemp("", "toolpdp-check-")
	if err != nil {
		c.Error = err.Error()
		return c
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{".env", ".git/config"} {
		p := filepath.Join(dir, name)
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if err == nil {
			err = os.WriteFile(p, []byte("x\n"), 0o600)
		}
		if err != nil {
			c.Error = err.Error()
			return c
		}
	}
	roots := []string{dir}
	spec := confine.Spec{Argv: []string{"true"}, Env: map[string]string{"PATH": "/usr/bin:/bin"}, EnvEnforced: true, Cwd: dir,
		ReadPaths: &roots, WritePaths: &roots, NoNetwork: true, ReadOnlyNames: []string{".git", ".env"}, UnreadableNames: []string{".env"}}
	var stderr strings.Builder
	rep, code := confine.Run(spec, confine.Options{}, eofReader{}, io.Discard, &stderr)
	c.Kernel, c.Missing = rep.Kernel, rep.Missing
	c.Available = code == 0 && !rep.Refused
	if !c.Available {
		c.Error = strings.TrimSpace(stderr.String())
		if c.Error == "" {
			c.Error = fmt.Sprintf("a confined true exited %d", code)
		}
		if len(c.Missing) > 0 {
			c.Error = "not enforced here: " + strings.Join(c.Missing, ", ")
		}
	}
	return c
}

// err is nil when confinement is available, else why not.
func (c confinementCheck) err() error {
	if c.Available {
		return nil
	}
	return errors.New(c.Error)
}

func (c confinementCheck) writeText(w io.Writer) {
	k := c.Kernel
	fmt.Fprintf(w, "confinement: %s\n", map[bool]string{true: "available", false: "NOT available"}[c.Available])
	fmt.Fprintf(w, "landlock ABI: %d\nuser namespace: %v\nmount namespace: %v\npid namespace: %v\nnetwork namespace: %v\nipc namespace: %v\nseccomp: %v\n",
		k.LandlockABI, k.UserNamespace, k.MountNamespace, k.PIDNamespace, k.NetNamespace, k.IPCNamespace, k.Seccomp)
	if len(c.Missing) > 0 {
		fmt.Fprintf(w, "not enforced: %s\n", strings.Join(c.Missing, ", "))
	}
	if c.Error != "" {
		fmt.Fprintf(w, "why: %s\n", c.Error)
	}
}

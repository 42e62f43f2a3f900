package confine

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Spec is what a run asks for: an allowed call's execution and the command.
type Spec struct {
	Argv        []string          // the command and its arguments
	Env         map[string]string // the constructed environment
	EnvEnforced bool              // the command gets exactly Env (else the caller's environment)
	Cwd         string            // the pinned working directory; "" keeps the caller's

	// ReadPaths and WritePaths are the resolved scopes; nil is not enforced,
	// an empty list allows nothing (beyond the profile and TMPDIR).
	ReadPaths  *[]string
	WritePaths *[]string
	// NoNetwork forbids every socket that leaves the run.
	NoNetwork bool
	// Proxy, when set, is the run's only way out: a network namespace
	// with only loopback, where 127.0.0.1:ProxyPort reaches Proxy (the
	// proxy variables say so); every other socket is held as NoNetwork
	// holds it.
	Proxy ConnServer
	// ReadOnlyNames stay read-only inside the write roots; UnreadableNames
	// are neither read nor written. Names compare as the protected-paths
	// guardrail compares them.
	ReadOnlyNames   []string
	UnreadableNames []string
}

// Options change how a run goes, not what it enforces.
type Options struct {
	// BestEffort runs the command even when a required part cannot be
	// enforced; the report still names every such part.
	BestEffort bool
	// Profile is what every run may read besides its scopes; DefaultProfile when nil.
	Profile *Profile
	// TempDir holds the run's private TMPDIR; os.TempDir() when "".
	TempDir string
	// MaxWalk bounds the entries examined looking for protected names;
	// DefaultMaxWalk when 0.
	MaxWalk int
}

// DefaultMaxWalk is how many directory entries a run examines at most
// looking for protected names inside its roots.
const DefaultMaxWalk = 200_000

func (s *Spec) validate() error {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return errors.New("no command to run")
	}
	if s.Cwd != "" && !filepath.IsAbs(s.Cwd) {
		return fmt.Errorf("cwd %q is not an absolute path", s.Cwd)
	}
	for _, list := range []*[]string{s.ReadPaths, s.WritePaths} {
		if list == nil {
			continue
		}
		for _, p := range *list {
			if !filepath.IsAbs(p) {
				return fmt.Errorf("scope root %q is not an absolute path (an execution carries resolved roots)", p)
			}
		}
	}
	return nil
}

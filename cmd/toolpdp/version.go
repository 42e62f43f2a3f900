package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	opaversion "github.com/open-policy-agent/opa/v1/version"
)

// Version is toolpdp's version, set at build time
// (-ldflags "-X main.Version=v1.2.3"); otherwise the module's version
// from the build info, or "devel".
var Version = ""

// version prints toolpdp's, Go's and OPA's versions.
func version(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", stderr)
	withSynopsis(fs, "toolpdp version")
	if err := parse(fs, args); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stdout, "toolpdp %s\ngo %s\nopa %s\n", toolpdpVersion(), runtime.Version(), opaversion.Version)
	return err
}

func toolpdpVersion() string {
	if Version != "" {
		return Version
	}
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}

// Package rego embeds toolpdp's policy library and default agent as OPA
// bundles, so the binary decides with no configuration.
//
// library/ is the library (roots ["toolpdp"]): the decision entrypoint
// data.toolpdp.decision.result and its packages, tables and tests.
// default/ defines the agent "default" (roots ["agents"]); it is loaded only
// when no --bundle is given.
package rego

import (
	"embed"
	"io/fs"
)

//go:embed all:library all:default
var files embed.FS

// Library is the policy library bundle.
func Library() fs.FS { return sub("library") }

// Default is the bundle holding the default agent.
func Default() fs.FS { return sub("default") }

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // impossible: dir is embedded above
	}
	return f
}

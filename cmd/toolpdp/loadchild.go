package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/toolpdp/toolpdp/pdp/loadchild"
)

// loadChildCommand is the hidden command a bundle load's child process
// runs (pdp/loadchild): not for people, so not in the usage.
const loadChildCommand = "load-child"

func loadChild(ctx context.Context, args []string, stdin io.Reader, stdout, _ io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: %s MEMORY_BYTES", errUsage, loadChildCommand)
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%w: %s: %q is not a number of bytes", errUsage, loadChildCommand, args[0])
	}
	return loadchild.Serve(ctx, n, stdin, stdout)
}

package main

import (
	"io"
	"testing"

	"github.com/toolpdp/toolpdp/pdp/policy"
)

func TestDecisionCacheFlag(t *testing.T) {
	for args, want := range map[string]int{"": policy.DefaultMemoEntries, "--decision-cache": policy.DefaultMemoEntries,
		"--decision-cache=false": -1, "--decision-cache=0": -1, "--decision-cache=500": 500} {
		c, parse := serveFlags(io.Discard)
		var list []string
		if args != "" {
			list = []string{args}
		}
		if err := parse(list); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if got := c.Engine.DecisionCache; got != want {
			t.Errorf("%q: %d, want %d", args, got, want)
		}
	}
	c, parse := serveFlags(io.Discard)
	if err := parse([]string{"--decision-cache=-3"}); err == nil {
		t.Errorf("a negative size was accepted: %d", c.Engine.DecisionCache)
	}
}

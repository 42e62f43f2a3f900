package main

import (
	"fmt"
	"strconv"

	"github.com/toolpdp/toolpdp/pdp/policy"
)

// cacheFlag is --decision-cache: true (the default size), false or 0
// (off), or a number of decisions kept per policy snapshot.
type cacheFlag int

func (c *cacheFlag) String() string { return strconv.Itoa(int(*c)) }

func (c *cacheFlag) IsBoolFlag() bool { return true }

func (c *cacheFlag) Set(v string) error {
	if b, err := strconv.ParseBool(v); err == nil {
		*c = cacheFlag(policy.DefaultMemoEntries)
		if !b {
			*c = 0
		}
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not true, false or a number of decisions", v)
	}
	*c = cacheFlag(n)
	return nil
}

// config is the flag as pdp.Config.DecisionCache reads it.
func (c cacheFlag) config() int {
	if c == 0 {
		return -1
	}
	return int(c)
}

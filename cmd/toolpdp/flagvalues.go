package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/toolpdp/toolpdp/pdp"
)

// cacheFlag is --decision-cache, written into pdp.Config.DecisionCache:
// true (the default size), false or 0 (off: -1), or a number of decisions
// kept per policy snapshot.
type cacheFlag struct{ n *int }

func (c cacheFlag) String() string {
	if c.n == nil {
		return ""
	}
	return strconv.Itoa(max(*c.n, 0))
}

func (c cacheFlag) IsBoolFlag() bool { return true }

func (c cacheFlag) Set(v string) error {
	if b, err := strconv.ParseBool(v); err == nil {
		*c.n = pdp.DefaultDecisionCache
		if !b {
			*c.n = -1
		}
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not true, false or a number of decisions", v)
	}
	*c.n = n
	if n == 0 {
		*c.n = -1
	}
	return nil
}

// modeFlag is an octal file mode: --unix-socket-mode.
type modeFlag os.FileMode

func (m *modeFlag) String() string { return fmt.Sprintf("%04o", uint32(*m)) }

func (m *modeFlag) Set(v string) error {
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o777 || n == 0 {
		return fmt.Errorf("%q is not an octal file mode that lets anyone connect", v)
	}
	*m = modeFlag(n)
	return nil
}

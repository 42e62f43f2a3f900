//go:build !linux

package envguard

import "errors"

// noLinks has no single-walk proof here: every path is walked.
func noLinks(string) error { return errors.ErrUnsupported }

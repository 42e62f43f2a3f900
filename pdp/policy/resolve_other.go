//go:build !linux

package policy

// walkWithoutLinks has no single-walk proof here: envguard walks every path.
func walkWithoutLinks(string) bool { return false }

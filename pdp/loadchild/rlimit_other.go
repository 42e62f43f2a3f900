//go:build !linux

package loadchild

// limitMemory is a no-op where prlimit(2) does not exist: only the
// deadline and the child's GOMEMLIMIT bound a load there.
func limitMemory(int, int64) error { return nil }

func limitSelf(int64) error { return nil }

func limitChild(pid int, bytes int64) error { return limitMemory(pid, bytes) }

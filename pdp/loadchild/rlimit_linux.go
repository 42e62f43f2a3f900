package loadchild

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// limitMemory bounds a started process's data (RLIMIT_DATA: its heap and
// every private writable mapping): past it, its allocations fail and the
// Go runtime ends it.
func limitMemory(pid int, bytes int64) error {
	lim := &unix.Rlimit{Cur: uint64(bytes), Max: uint64(bytes)}
	return unix.Prlimit(pid, unix.RLIMIT_DATA, lim, nil)
}

// limitChild is limitMemory for the parent's first bound on its child.
// The child may have tightened its own bound already (it starts at once);
// lowering it again is then a raise of its hard limit, which a process
// without CAP_SYS_RESOURCE may not do — and need not: a child bound at
// least as tight as the parent's is bound.
func limitChild(pid int, bytes int64) error {
	err := limitMemory(pid, bytes)
	if err == unix.EPERM {
		var cur unix.Rlimit
		if unix.Prlimit(pid, unix.RLIMIT_DATA, nil, &cur) == nil && cur.Max <= uint64(bytes) {
			return nil
		}
	}
	return err
}

// limitSelf bounds this process's data to what it maps now plus bytes.
func limitSelf(bytes int64) error {
	now, err := vmData()
	if err != nil {
		return err
	}
	return limitMemory(os.Getpid(), now+bytes)
}

// vmData is this process's VmData: the private writable mappings
// RLIMIT_DATA counts.
func vmData() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmData:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/self/status: no VmData")
}

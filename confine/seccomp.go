package confine

import (
	"fmt"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// lowHalf is the offset of a 64-bit argument's low 32 bits: the machines
// toolpdp is built for (amd64, arm64) are little-endian.
const lowHalf = 0

// alwaysDenied are system calls no confined command needs that would
// reach past the other confinements: io_uring performs socket and file
// operations this filter never sees; the kernel keyrings are a store of
// credentials shared outside the run; the rest are kernel attack surface
// or, like open_by_handle_at, open files by handle instead of by path.
var alwaysDenied = []string{
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"add_key", "keyctl", "request_key",
	"bpf", "userfaultfd", "perf_event_open", "open_by_handle_at",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
}

// socketFilter says which address families socket(2) may open when the
// run has no network: the internet families only inside a network
// namespace of the run's own (their loopback is the run's), and unix
// sockets only where Landlock confines whom they connect to.
type socketFilter struct {
	NoNetwork bool
	Inet      bool // AF_INET, AF_INET6, AF_NETLINK: the run has its own network namespace
	Unix      bool // AF_UNIX: Landlock restricts pathname sockets to the scopes
}

// loadSeccomp installs the filter on every thread of the process (and so
// on every process it starts). It refuses system calls of another
// architecture's table (an int 0x80 call on x86-64 would pass a filter
// written for the native numbers) and TIOCSTI/TIOCLINUX ioctls, which
// type into the terminal the run shares with its caller.
func loadSeccomp(f socketFilter) error {
	info, err := arch.GetInfo("")
	if err != nil {
		return err
	}
	groups := []seccomp.SyscallGroup{{Action: seccomp.ActionErrno, Names: alwaysDenied}}
	if f.NoNetwork {
		var keep []seccomp.Condition
		if f.Inet {
			for _, fam := range []uint64{unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK} {
				keep = append(keep, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: fam})
			}
		}
		if f.Unix {
			keep = append(keep, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX})
		}
		if len(keep) == 0 {
			groups = append(groups, seccomp.SyscallGroup{Action: seccomp.ActionErrno, Names: []string{"socket"}})
		} else {
			groups = append(groups, seccomp.SyscallGroup{Action: seccomp.ActionErrno,
				NamesWithCondtions: []seccomp.NameWithConditions{{Name: "socket", Conditions: keep}}})
		}
	}
	policy := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
	body, err := policy.Assemble()
	if err != nil {
		return fmt.Errorf("seccomp policy: %w", err)
	}
	ioctl, ok := info.SyscallNames["ioctl"]
	if !ok {
		return fmt.Errorf("seccomp: no ioctl in the %s table", info.Name)
	}
	const errno = unix.SECCOMP_RET_ERRNO
	prefix := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: errno | uint32(unix.ENOSYS)},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(ioctl), SkipFalse: 4},
		// The request is an unsigned int: only its low 32 bits count, so
		// only they are compared (setting the high bits would not make it
		// another request).
		bpf.LoadAbsolute{Off: 16 + 8 + lowHalf, Size: 4}, // seccomp_data.args[1]
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCSTI, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCLINUX, SkipFalse: 1},
		bpf.RetConstant{Val: errno | uint32(unix.EPERM)},
	}
	raw, err := bpf.Assemble(append(prefix, body...))
	if err != nil {
		return fmt.Errorf("seccomp program: %w", err)
	}
	filters := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filters[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	switch {
	case e != 0:
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC): %w", e)
	case r != 0: // the id of a thread that could not take the filter
		return fmt.Errorf("seccomp: thread %d could not be synchronised", r)
	}
	return nil
}

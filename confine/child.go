package confine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// childArgv0 names the run's own process: the caller's process starts the
// same binary under this name, and IsChild recognises it.
const childArgv0 = "toolpdp-exec-confined"

// plan is what the caller's process hands the run's: everything decided,
// nothing left to look up.
type plan struct {
	Path       string       `json:"path"` // the command, resolved
	Argv       []string     `json:"argv"`
	Env        []string     `json:"env"`
	Dir        string       `json:"dir"`
	ABI        int          `json:"abi"`
	FS         fsRules      `json:"fs"`
	LandlockIP bool         `json:"landlock_ip"` // TCP and UDP through Landlock: no network namespace
	Sockets    socketFilter `json:"sockets"`
	ReadOnly   []string     `json:"read_only"`
	Unreadable []string     `json:"unreadable"`
	Mounts     bool         `json:"mounts"` // the run has a mount namespace of its own
	PIDs       bool         `json:"pids"`   // ... a PID namespace
	Net        bool         `json:"net"`    // ... a network namespace
	Shm        bool         `json:"shm"`    // mount a private /dev/shm
	Relay      bool         `json:"relay"`  // hand the command's connections to 127.0.0.1:ProxyPort over to the caller (relayFD)

	relayL *net.TCPListener // the run's process's: set up by setUp when Relay
}

// status is what the run's process could set up, step by step.
type status struct {
	Done   []string          `json:"done"`
	Failed map[string]string `json:"failed"`
}

// The steps of the run's process.
const (
	stepPrivate    = "private_mounts"
	stepReadOnly   = "read_only:"
	stepMask       = "mask:"
	stepShm        = "private_shm"
	stepProc       = "proc"
	stepLoopback   = "loopback"
	stepSubreaper  = "subreaper"
	stepCaps       = "capabilities"
	stepLandlock   = "landlock"
	stepSeccomp    = "seccomp"
	stepNoNewPrivs = "no_new_privs"
)

// IsChild reports whether this process is a run's own, started by Run.
func IsChild() bool { return len(os.Args) > 0 && os.Args[0] == childArgv0 }

// Child is the run's own process: it reads the plan on fd 3, sets up its
// mounts, confines itself, reports on fd 4, and on the caller's go
// starts the command and waits for it. It returns the exit code.
func Child() int {
	planFile := os.NewFile(3, "plan")
	in := bufio.NewReader(planFile)
	out := os.NewFile(4, "status")
	line, err := in.ReadBytes('\n')
	var p plan
	if err == nil {
		err = json.Unmarshal(line, &p)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolpdp exec: reading the plan:", err)
		return 126
	}
	// The command starts from this thread, which alone drops the
	// capabilities the setup needed; it stays locked so no other
	// goroutine runs on it, and so the command's parent-death signal
	// belongs to it.
	runtime.LockOSThread()
	st := setUp(&p)
	if err := json.NewEncoder(out).Encode(st); err != nil {
		return 126
	}
	out.Close()
	if b, err := in.ReadByte(); err != nil || b != 'g' {
		return 126 // the caller refused the run
	}
	planFile.Close()
	if err := closeInherited(); err != nil {
		fmt.Fprintln(os.Stderr, "toolpdp exec:", err)
		return 126
	}
	if p.relayL != nil {
		go relay(p.relayL, os.NewFile(relayFD, "relay"))
	}
	return runCommand(&p)
}

func setUp(p *plan) status {
	st := status{Failed: map[string]string{}}
	step := func(name string, err error) {
		if err != nil {
			st.Failed[name] = err.Error()
		} else {
			st.Done = append(st.Done, name)
		}
	}
	if p.Mounts {
		err := privateMounts()
		step(stepPrivate, err)
		if err == nil { // else a mount would reach the caller's namespace
			for _, path := range p.ReadOnly {
				step(stepReadOnly+path, bindReadOnly(path))
			}
			for _, path := range p.Unreadable {
				step(stepMask+path, mask(path))
			}
			if p.Shm {
				step(stepShm, privateTmpfs("/dev/shm"))
			}
			if p.PIDs {
				step(stepProc, mountProc())
			}
		}
	}
	if p.Net {
		step(stepLoopback, loopbackUp())
	}
	if p.Relay {
		var err error
		p.relayL, err = listenRelay()
		step(stepRelay, err)
	}
	step(stepSubreaper, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
	step(stepCaps, dropCapabilities())
	if p.ABI > 0 {
		step(stepLandlock, restrictLandlock(p.ABI, p.FS, p.LandlockIP))
	}
	step(stepSeccomp, loadSeccomp(p.Sockets))
	step(stepNoNewPrivs, checkNoNewPrivs())
	return st
}

// dropCapabilities leaves every thread of this process (and so the
// command) no capabilities, and a uid 0 none to gain on exec: the
// namespaces' setup needed them, the command does not. The process is made
// non-dumpable too, so the command (its child, in the same domain) cannot
// ptrace it or read its memory.
func dropCapabilities() error {
	allThreads := func(what string, nr, a1, a2, a3 uintptr) error {
		// prctl reads five arguments: the unused ones must be zero.
		if _, _, e := psx.Syscall6(nr, a1, a2, a3, 0, 0, 0); e != 0 {
			return fmt.Errorf("%s: %w", what, e)
		}
		return nil
	}
	if os.Geteuid() == 0 {
		// SECBIT_NOROOT, _LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE, _LOCKED
		// (linux/securebits.h).
		const bits = 1<<0 | 1<<1 | 1<<6 | 1<<7
		if err := allThreads("securebits", unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, bits, 0); err != nil {
			return err
		}
	}
	if err := allThreads("ambient capabilities", unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := allThreads("capset", unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&none[0])), 0); err != nil {
		return err
	}
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&none)
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

func checkNoNewPrivs() error {
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return err
	}
	if v != 1 {
		return fmt.Errorf("no_new_privs is not set")
	}
	return nil
}

// runCommand starts the command, forwards the signals a caller sends,
// waits, then ends every process the command left (they were reparented
// here: this process is their subreaper, or their PID namespace's init).
func runCommand(p *plan) int {
	cmd := &exec.Cmd{Path: p.Path, Args: p.Argv, Env: p.Env, Dir: p.Dir, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "toolpdp exec: %v\n", err)
		return 126
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-signals:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	endDescendants()
	return exitCode(cmd.ProcessState, err)
}

func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		fmt.Fprintf(os.Stderr, "toolpdp exec: %v\n", err)
		return 126
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// endDescendants kills every child this process still has (orphans the
// command left, reparented here) until none is left.
func endDescendants() {
	self := os.Getpid()
	for range 1000 {
		kids := children(self)
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			_ = unix.Kill(k, unix.SIGKILL)
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		var child int
		if _, err := fmt.Sscanf(e.Name(), "%d", &child); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if ppidOf(b) == pid {
			out = append(out, child)
		}
	}
	return out
}

// ppidOf reads the parent pid from /proc/PID/stat: the fourth field,
// counted after the command name's closing parenthesis (the name may
// hold spaces and parentheses).
func ppidOf(stat []byte) int {
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			var state byte
			var ppid int
			if _, err := fmt.Sscanf(string(stat[i+1:]), " %c %d", &state, &ppid); err == nil {
				return ppid
			}
			return -1
		}
	}
	return -1
}

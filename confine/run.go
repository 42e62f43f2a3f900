package confine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The exit codes of a run that did not get to the command's own.
const (
	ExitRefused  = 126 // a required part cannot be enforced, or the run could not start
	ExitNotFound = 127 // the command was not found
)

// Run runs spec's command confined, with stdin, stdout and stderr as its
// own. Before the command starts it writes the report to stderr, one line
// per part prefixed "toolpdp exec: "; it returns the report, completed
// with the exit code, and the exit code: the command's (128+N for signal
// N), ExitRefused or ExitNotFound.
func Run(spec Spec, opt Options, stdin io.Reader, stdout, stderr io.Writer) (*Report, int) {
	rep := &Report{BestEffort: opt.BestEffort, Kernel: Kernel{SimulatedAbsent: simulateAbsent}}
	fail := func(code int, format string, args ...any) (*Report, int) {
		fmt.Fprintf(stderr, "toolpdp exec: "+format+"\n", args...)
		rep.ExitCode = &code
		return rep, code
	}
	if err := spec.validate(); err != nil {
		return fail(ExitRefused, "%v", err)
	}
	if err := closeInherited(); err != nil {
		return fail(ExitRefused, "%v", err)
	}
	profile := opt.Profile
	if profile == nil {
		p, err := DefaultProfile()
		if err != nil {
			return fail(ExitRefused, "%v", err)
		}
		profile = &p
	}
	if opt.MaxWalk <= 0 {
		opt.MaxWalk = DefaultMaxWalk
	}
	rep.Kernel.LandlockABI = landlockABI()
	dir := spec.Cwd
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fail(ExitRefused, "working directory: %v", err)
		}
		dir = wd
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fail(ExitRefused, "cwd %q is not a directory the run can enter", dir)
	}
	tmp, err := os.MkdirTemp(opt.TempDir, "toolpdp-exec-")
	if err != nil {
		return fail(ExitRefused, "private TMPDIR: %v", err)
	}
	defer os.RemoveAll(tmp)
	if real, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = real
	}
	rep.TempDir = tmp
	env := environment(spec, tmp)
	path, err := lookPath(spec.Argv[0], env, dir)
	if err != nil {
		return fail(ExitNotFound, "%v", err)
	}
	// Orphans of the run's process land here, where they are ended.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

	p := plan{Path: path, Argv: spec.Argv, Env: env, Dir: dir, ABI: rep.Kernel.LandlockABI}
	roots := protectedRoots(spec, dir)
	readOnly, unreadable := newMatcher(spec.ReadOnlyNames), newMatcher(spec.UnreadableNames)
	var found protectedFound
	found.unreadable, found.unTruncated = unreadable.find(roots.reads, opt.MaxWalk)
	found.readOnly, found.roTruncated = readOnly.find(roots.writes, opt.MaxWalk)
	found.readOnly = slices.DeleteFunc(found.readOnly, func(s string) bool { return slices.Contains(found.unreadable, s) })

	isolated := spec.NoNetwork || spec.Proxy != nil
	var relayCaller, relayRun *os.File
	if spec.Proxy != nil {
		if relayCaller, relayRun, err = relayPair(); err != nil {
			return fail(ExitRefused, "%v", err)
		}
		defer relayCaller.Close()
	}
	pipes, child, flags, nsErr := startChild(isolated, relayRun, stdin, stdout, stderr)
	if relayRun != nil {
		relayRun.Close()
	}
	if child == nil {
		return fail(ExitRefused, "starting the confined process: %v", nsErr)
	}
	defer pipes.close()
	p.Mounts, p.PIDs, p.Net = flags&unix.CLONE_NEWNS != 0, flags&unix.CLONE_NEWPID != 0, flags&unix.CLONE_NEWNET != 0
	p.Shm = p.Mounts && exists("/dev/shm")
	p.FS = fileRules(spec, profile, tmp, p.Shm)
	p.LandlockIP = isolated && !p.Net
	p.Relay = spec.Proxy != nil && p.Net
	p.Sockets = socketFilter{NoNetwork: isolated, Inet: p.Net, Unix: rep.Kernel.LandlockABI >= 9 && p.FS.Handled}
	if p.Mounts {
		p.ReadOnly, p.Unreadable = found.readOnly, found.unreadable
	}
	st, err := pipes.exchange(&p)
	if err != nil {
		_ = child.Process.Kill()
		_ = child.Wait()
		return fail(ExitRefused, "the confined process failed to set up: %v", err)
	}
	compose(rep, &spec, &p, flags, nsErr, st, found, opt.MaxWalk)
	rep.settle()
	rep.WriteText(stderr, "toolpdp exec: ")
	if rep.Refused {
		pipes.abort()
		_ = child.Wait()
		endDescendants()
		code := ExitRefused
		rep.ExitCode = &code
		return rep, code
	}
	before := map[string]bool{}
	for _, f := range append(slices.Clone(found.readOnly), found.unreadable...) {
		before[f] = true
	}
	if p.Relay {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go serveRelay(ctx, relayCaller, spec.Proxy)
	}
	code := pipes.goAndWait(child)
	endDescendants()
	for _, c := range readOnly.newSince(before, roots.writes, opt.MaxWalk) {
		rep.Created = append(rep.Created, c)
		fmt.Fprintf(stderr, "toolpdp exec: warning: the run created the protected entry %s (a mount protects only what exists when the run starts)\n", c)
	}
	rep.ExitCode = &code
	return rep, code
}

// environment is the command's: exactly the execution's env when it is
// enforced, else this process's; TMPDIR is the run's own either way.
func environment(spec Spec, tmp string) []string {
	m := map[string]string{}
	if spec.EnvEnforced {
		for k, v := range spec.Env {
			m[k] = v
		}
	} else {
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok {
				m[k] = v
			}
		}
	}
	m["TMPDIR"] = tmp
	if spec.Proxy != nil {
		proxyEnv(m)
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// lookPath finds the command as execvp would in the command's own
// environment: a name with a slash is taken as it is (relative to the
// cwd), another is searched in the env's PATH (the system default
// /bin:/usr/bin without one).
func lookPath(name string, env []string, dir string) (string, error) {
	resolve := func(p string) string {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return p
	}
	executable := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
	}
	if strings.Contains(name, "/") {
		if p := resolve(name); executable(p) {
			return p, nil
		}
		return "", fmt.Errorf("%s: no such executable", name)
	}
	path := "/bin:/usr/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if p := resolve(filepath.Join(d, name)); executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in the command's PATH %q", name, path)
}

type rootSet struct{ writes, reads []string }

// protectedRoots are where protected names are looked for: the write
// roots (the cwd when writes are not confined) for the read-only names,
// and every root the command may read for the unreadable ones.
func protectedRoots(spec Spec, dir string) rootSet {
	var rs rootSet
	if spec.WritePaths != nil {
		rs.writes = slices.Clone(*spec.WritePaths)
	} else {
		rs.writes = []string{dir}
	}
	if spec.ReadPaths != nil {
		rs.reads = slices.Clone(*spec.ReadPaths)
	} else {
		rs.reads = []string{dir}
	}
	rs.reads = append(rs.reads, rs.writes...)
	return rs
}

// fileRules are the run's Landlock rules: the scopes, the profile and the
// private TMPDIR (and /dev/shm when the run has its own).
func fileRules(spec Spec, prof *Profile, tmp string, shm bool) fsRules {
	var r fsRules
	r.Handled = spec.ReadPaths != nil || spec.WritePaths != nil
	if !r.Handled {
		return r
	}
	split := func(paths []string, dirs, files *[]string) {
		for _, p := range paths {
			if dir, ok := isDir(p); ok && dir {
				*dirs = append(*dirs, p)
			} else if ok {
				*files = append(*files, p)
			}
		}
	}
	reads := slices.Clone(prof.Read)
	if spec.ReadPaths != nil {
		reads = append(reads, *spec.ReadPaths...)
	} else {
		reads = append(reads, "/")
	}
	split(reads, &r.ReadDirs, &r.ReadFiles)
	writes := []string{tmp}
	if shm {
		writes = append(writes, "/dev/shm")
	}
	if spec.WritePaths != nil {
		writes = append(writes, *spec.WritePaths...)
	} else {
		r.WriteOnly = []string{"/"}
	}
	split(writes, &r.WriteDirs, &r.WriteFiles)
	split(prof.Write, &r.WriteDirs, &r.WriteFiles)
	split(prof.Terminal, &r.TerminalDirs, &r.Terminals)
	return r
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// childPipes carry the plan and the go to the run's process (fd 3) and
// its status back (fd 4).
type childPipes struct {
	planW   *os.File
	statusR *os.File
}

func (c *childPipes) close() {
	c.planW.Close()
	c.statusR.Close()
}

func (c *childPipes) exchange(p *plan) (status, error) {
	var st status
	b, err := json.Marshal(p)
	if err != nil {
		return st, err
	}
	if _, err := c.planW.Write(append(b, '\n')); err != nil {
		return st, err
	}
	if err := json.NewDecoder(bufio.NewReader(c.statusR)).Decode(&st); err != nil {
		return st, fmt.Errorf("no status: %w", err)
	}
	return st, nil
}

func (c *childPipes) abort() { c.planW.Close() }

// goAndWait lets the command start, forwards the signals this process
// gets to the run's, and returns the exit code.
func (c *childPipes) goAndWait(child *exec.Cmd) int {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(signals)
	if _, err := c.planW.Write([]byte{'g'}); err != nil {
		_ = child.Process.Kill()
	}
	c.planW.Close()
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	for {
		select {
		case s := <-signals:
			_ = child.Process.Signal(s)
		case err := <-done:
			return exitCode(child.ProcessState, err)
		}
	}
}

// startChild starts the run's process in as many namespaces as the node
// allows: user, mount, PID, IPC and (for no network) network ones; without
// a user namespace, the same as root; else none. It returns the flags
// that worked and why the fuller sets did not.
func startChild(noNetwork bool, relay *os.File, stdin io.Reader, stdout, stderr io.Writer) (*childPipes, *exec.Cmd, uintptr, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, 0, err
	}
	base := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC)
	if noNetwork {
		base |= unix.CLONE_NEWNET
	}
	var attempts []uintptr
	if !simulated("userns") {
		attempts = append(attempts, base|unix.CLONE_NEWUSER)
		if os.Geteuid() == 0 {
			attempts = append(attempts, base)
		}
	}
	attempts = append(attempts, 0)
	var why []string
	if simulated("userns") {
		why = append(why, "namespaces: simulated absent")
	}
	// The parent-death signal belongs to the thread that starts the
	// child: it stays locked to this goroutine until the run ends.
	runtime.LockOSThread()
	for _, flags := range attempts {
		planR, planW, err := os.Pipe()
		if err != nil {
			return nil, nil, 0, err
		}
		statusR, statusW, err := os.Pipe()
		if err != nil {
			return nil, nil, 0, err
		}
		extra := []*os.File{planR, statusW}
		if relay != nil {
			extra = append(extra, relay) // relayFD
		}
		cmd := &exec.Cmd{Path: self, Args: []string{childArgv0, "exec"}, Env: []string{},
			Stdin: stdin, Stdout: stdout, Stderr: stderr, ExtraFiles: extra, WaitDelay: 2 * time.Second,
			SysProcAttr: childAttr(flags)}
		err = cmd.Start()
		planR.Close()
		statusW.Close()
		if err == nil {
			var nsErr error
			if len(why) > 0 {
				nsErr = errors.New(strings.Join(why, "; "))
			}
			return &childPipes{planW: planW, statusR: statusR}, cmd, flags, nsErr
		}
		planW.Close()
		statusR.Close()
		why = append(why, fmt.Sprintf("%s: %v", flagNames(flags), err))
	}
	return nil, nil, 0, errors.New(strings.Join(why, "; "))
}

func childAttr(flags uintptr) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	if flags&unix.CLONE_NEWUSER != 0 {
		uid, gid := os.Getuid(), os.Getgid()
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		if uid != 0 {
			// Only a uid 0 keeps its capabilities through exec; another
			// needs the setup's as ambient ones (dropped before the command).
			attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN}
		}
	}
	return attr
}

func flagNames(flags uintptr) string {
	if flags == 0 {
		return "no namespaces"
	}
	var names []string
	for _, f := range []struct {
		flag uintptr
		name string
	}{{unix.CLONE_NEWUSER, "user"}, {unix.CLONE_NEWNS, "mount"}, {unix.CLONE_NEWPID, "pid"}, {unix.CLONE_NEWIPC, "ipc"}, {unix.CLONE_NEWNET, "network"}} {
		if flags&f.flag != 0 {
			names = append(names, f.name)
		}
	}
	return strings.Join(names, "+") + " namespaces"
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// closeInherited marks every descriptor above stderr close-on-exec: a file
// or socket the caller left open would reach the command unchecked (the
// kernel checks a path when it is opened, not a descriptor handed down).
func closeInherited() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing inherited descriptors: %w", err)
	}
	for _, e := range entries {
		var fd int
		if _, err := fmt.Sscanf(e.Name(), "%d", &fd); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

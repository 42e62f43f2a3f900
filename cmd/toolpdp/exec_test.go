package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The kernel features confined runs use, probed once: the test says what
// it found, and skips (with the reason) only what is truly missing.
var (
	probeOnce   sync.Once
	landlockABI int
	userNSError error
)

func probeKernel(t *testing.T) {
	t.Helper()
	probeOnce.Do(func() {
		// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
		v, _, errno := syscall.Syscall(444, 0, 0, 1)
		if errno == 0 {
			landlockABI = int(v)
		}
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}}
		userNSError = cmd.Run()
	})
	t.Logf("kernel: Landlock ABI %d; user namespaces: %v (uid %d)", landlockABI, userNSError == nil, os.Getuid())
	if landlockABI < 1 {
		t.Skip("this kernel has no Landlock: confined runs cannot be tested here")
	}
	if userNSError != nil {
		t.Skipf("no user namespaces here (%v): the mount-namespace parts cannot be tested", userNSError)
	}
}

func needPrograms(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s is not installed: %v", n, err)
		}
	}
}

var (
	simOnce sync.Once
	simBins map[string]string
	simErr  error
)

// simulatedBinary is toolpdp built with the test-only switch that makes
// the probe find no Landlock ("landlock") or no namespaces ("userns").
func simulatedBinary(t *testing.T, absent string) string {
	t.Helper()
	simOnce.Do(func() {
		simBins = map[string]string{}
		dir, err := os.MkdirTemp("", "toolpdp-sim-")
		if err != nil {
			simErr = err
			return
		}
		for _, what := range []string{"landlock", "userns"} {
			bin := filepath.Join(dir, "toolpdp-no-"+what)
			out, err := exec.Command("go", "build", "-ldflags", "-X github.com/toolpdp/toolpdp/confine.simulateAbsent="+what, "-o", bin, ".").CombinedOutput()
			if err != nil {
				simErr = fmt.Errorf("%v\n%s", err, out)
				return
			}
			simBins[what] = bin
		}
	})
	if simErr != nil {
		t.Fatal(simErr)
	}
	return simBins[absent]
}

// tree is a workspace for a confined run: work is read and written (it
// holds .git/config and .env), ro is only read, outside is neither.
type tree struct {
	work, ro, outside string
}

func newTree(t *testing.T) tree {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tr := tree{work: filepath.Join(root, "work"), ro: filepath.Join(root, "ro"), outside: filepath.Join(root, "outside")}
	for path, content := range map[string]string{
		"work/.git/config":      "[core]\n",
		"work/.env":             "TOKEN=secret-in-env\n",
		"work/src/main.c":       "int main(void) { return 0; }\n",
		"work/sub/.git/HEAD":    "ref: refs/heads/main\n",
		"ro/readme.txt":         "readable\n",
		"outside/secret.txt":    "secret-outside\n",
		"outside/victim/a.txt":  "x\n",
		"work/victim-in/a.txt":  "x\n",
		"outside/placeholder/x": "",
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// execution is what Decide returns for these scopes.
func (tr tree) execution(network string) *pb.Execution {
	return &pb.Execution{
		Env:             map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tr.work, "LANG": "C.UTF-8"},
		EnvEnforced:     true,
		Cwd:             tr.work,
		ReadPaths:       &pb.PathList{Paths: []string{tr.work, tr.ro}},
		WritePaths:      &pb.PathList{Paths: []string{tr.work}},
		Network:         network,
		ReadOnlyNames:   []string{".env", ".git", ".claude", ".codex", ".mcp.json"},
		UnreadableNames: []string{".env"},
	}
}

type runResult struct {
	stdout, stderr string
	code           int
	report         map[string]any
}

// runExec runs bin exec with ex and argv, with env added to this process's
// environment, bounded in time.
func runExec(t *testing.T, bin string, ex *pb.Execution, env []string, flags []string, argv ...string) runResult {
	t.Helper()
	dir := t.TempDir()
	exFile, reportFile := filepath.Join(dir, "execution.json"), filepath.Join(dir, "report.json")
	b, err := protojson.Marshal(ex)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"exec", "--execution", exFile, "--report", reportFile}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(append(args, "--"), argv...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("toolpdp exec %q did not finish in time\n%s", argv, stderr.String())
	}
	r := runResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	if err != nil && r.code < 0 {
		t.Fatalf("toolpdp exec: %v", err)
	}
	if rb, err := os.ReadFile(reportFile); err == nil {
		if err := json.Unmarshal(rb, &r.report); err != nil {
			t.Fatalf("--report is not JSON: %v\n%s", err, rb)
		}
	}
	return r
}

// listener counts the connections a confined command makes to a
// loopback port this test owns (the run's "network").
type listener struct {
	addr  string
	port  int
	count atomic.Int64
}

func loopbackListener(t *testing.T) *listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ln := &listener{addr: l.Addr().String(), port: l.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			ln.count.Add(1)
			c.Close()
		}
	}()
	return ln
}

func TestExecConfinesFiles(t *testing.T) {
	probeKernel(t)
	tr := newTree(t)
	bin := binary(t)
	script := strings.Join([]string{
		`echo inside > inside.txt && echo wrote-inside`,
		`echo x > "$TMPDIR/t" && echo wrote-tmpdir`,
		`echo x > ` + tr.outside + `/new.txt && echo WROTE-OUTSIDE`,
		`echo x > ` + tr.ro + `/new.txt && echo WROTE-READ-ONLY-ROOT`,
		`cat ` + tr.ro + `/readme.txt`,
		`cat ` + tr.outside + `/secret.txt`,
		`echo x >> .git/config && echo WROTE-GIT-CONFIG`,
		`rm -f .git/config && echo REMOVED-GIT-CONFIG`,
		`mv .git git-moved && echo MOVED-GIT`,
		`echo x > sub/.git/HEAD && echo WROTE-NESTED-GIT`,
		`cat .git/config`,
		`cat .env && echo READ-ENV`,
		`echo x > .env && echo WROTE-ENV`,
		`ln .env env-link && echo LINKED-ENV`,
		`umount .git && echo UMOUNTED-GIT`,
		`umount -l .env && echo UMOUNTED-ENV`,
		`unshare -Urm sh -c 'umount .git; echo x >> .git/config' && echo UNSHARED`,
		// No pipeline here: bash holds a pipeline's pipes while it runs.
		`ls /proc/$$/fd > "$TMPDIR/fds"; echo "fds: $(echo $(cat "$TMPDIR/fds"))"`,
		`mkdir -p new/.claude && echo made-claude`,
		`true`,
	}, "; ")
	r := runExec(t, bin, tr.execution("none"), nil, nil, "bash", "-c", script)
	for _, want := range []string{"wrote-inside", "wrote-tmpdir", "readable", "[core]"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
		}
	}
	for _, bad := range []string{"WROTE-OUTSIDE", "WROTE-READ-ONLY-ROOT", "secret-outside", "WROTE-GIT-CONFIG", "REMOVED-GIT-CONFIG",
		"MOVED-GIT", "WROTE-NESTED-GIT", "secret-in-env", "READ-ENV", "WROTE-ENV", "LINKED-ENV", "UMOUNTED-GIT", "UMOUNTED-ENV", "UNSHARED"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("the confined command could: %s\nstdout:\n%s\nstderr:\n%s", bad, r.stdout, r.stderr)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(tr.work, ".git/config")); string(b) != "[core]\n" {
		t.Errorf(".git/config is now %q", b)
	}
	if _, err := os.Stat(filepath.Join(tr.outside, "new.txt")); err == nil {
		t.Error("a file was created outside write_paths")
	}
	if b, _ := os.ReadFile(filepath.Join(tr.work, "inside.txt")); string(b) != "inside\n" {
		t.Errorf("inside.txt is %q, want the command's write", b)
	}
	if r.code != 0 {
		t.Errorf("exit %d, want the command's 0\n%s", r.code, r.stderr)
	}
	// The command holds stdin, stdout and stderr, no descriptor of toolpdp's.
	listed := false
	for _, line := range strings.Split(r.stdout, "\n") {
		if fds, ok := strings.CutPrefix(line, "fds: "); ok {
			listed = true
			if f := strings.TrimSpace(fds); f != "0 1 2" && f != "0 1 2 255" {
				t.Errorf("the command inherited descriptors: %s", fds)
			}
		}
	}
	if !listed {
		t.Errorf("the command did not list its descriptors:\n%s", r.stdout)
	}
	// A protected name the run created is reported (a mount protects only
	// what exists when the run starts).
	if created := fmt.Sprint(r.report["created_protected"]); !strings.Contains(created, filepath.Join(tr.work, "new/.claude")) {
		t.Errorf("created_protected %s does not name new/.claude", created)
	}
	// The private TMPDIR is gone after the run.
	if tmp, _ := r.report["tmpdir"].(string); tmp == "" {
		t.Errorf("the report names no TMPDIR: %v", r.report)
	} else if _, err := os.Stat(tmp); err == nil {
		t.Errorf("the private TMPDIR %s outlived the run", tmp)
	}
}

// The report names each confinement, what enforced it, and the kernel.
func TestExecReportNamesEachConfinement(t *testing.T) {
	probeKernel(t)
	tr := newTree(t)
	r := runExec(t, binary(t), tr.execution("none"), nil, nil, "true")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	parts := map[string]map[string]any{}
	list, _ := r.report["parts"].([]any)
	for _, p := range list {
		m, _ := p.(map[string]any)
		parts[fmt.Sprint(m["name"])] = m
	}
	for _, name := range []string{"writes", "reads", "read_only_names", "unreadable_names", "network", "no_new_privileges",
		"process_tree", "environment", "tmpdir", "cwd"} {
		p, ok := parts[name]
		switch {
		case !ok:
			t.Errorf("the report has no part %q: %v", name, r.report)
		case p["enforced"] != true:
			t.Errorf("part %q not enforced on this kernel: %v", name, p)
		case !strings.Contains(r.stderr, "toolpdp exec: "+name+": enforced"):
			t.Errorf("stderr does not report %q:\n%s", name, r.stderr)
		}
	}
	kernel, _ := r.report["kernel"].(map[string]any)
	if abi, _ := kernel["landlock_abi"].(float64); int(abi) != landlockABI {
		t.Errorf("report's landlock_abi %v, the probe found %d", kernel["landlock_abi"], landlockABI)
	}
	if kernel["mount_namespace"] != true || kernel["seccomp"] != true {
		t.Errorf("kernel %v: want a mount namespace and seccomp here", kernel)
	}
}

func TestExecNoNetwork(t *testing.T) {
	probeKernel(t)
	needPrograms(t, "bash", "python3", "curl", "gcc")
	tr := newTree(t)
	bin := binary(t)
	ln := loopbackListener(t)
	url := fmt.Sprintf("http://%s/", ln.addr)
	shapes := []struct {
		name string
		argv []string
	}{
		{"bash /dev/tcp", []string{"bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED", ln.port)}},
		{"python socket", []string{"python3", "-c", fmt.Sprintf("import socket; socket.create_connection(('127.0.0.1', %d), 3); print('CONNECTED')", ln.port)}},
		// Shapes that run curl despite the shell analysis.
		{"bash -oc errexit curl", []string{"bash", "-oc", "errexit", "curl -sS --max-time 5 " + url}},
		// gcc appends the compiler's own command line to the wrapper's: sh
		// takes it as $0 and its arguments, curl never sees it.
		{"gcc -wrapper curl", []string{"gcc", "-wrapper", "/bin/sh,-c,curl -sS --max-time 5 " + url + " && echo CONNECTED; exit 1", "-c", "src/main.c", "-o", filepath.Join(tr.work, "main.o")}},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			// With the network allowed the shape reaches the listener: it does run curl.
			before := ln.count.Load()
			open := runExec(t, bin, tr.execution(""), nil, nil, s.argv...)
			if ln.count.Load() == before {
				t.Fatalf("with the network allowed, %q never reached the loopback listener: the test proves nothing\nstdout:\n%s\nstderr:\n%s", s.argv, open.stdout, open.stderr)
			}
			before = ln.count.Load()
			r := runExec(t, bin, tr.execution("none"), nil, nil, s.argv...)
			if got := ln.count.Load() - before; got != 0 {
				t.Errorf("with network none, %q made %d connections to %s", s.argv, got, ln.addr)
			}
			if strings.Contains(r.stdout, "CONNECTED") || r.code == 0 {
				t.Errorf("with network none, %q succeeded (exit %d)\nstdout:\n%s\nstderr:\n%s", s.argv, r.code, r.stdout, r.stderr)
			}
		})
	}
	// UDP leaves the run neither: a datagram to the test's port never
	// arrives (inside a network namespace it goes to the run's own loopback).
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	send := []string{"python3", "-c", fmt.Sprintf("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', %d))", udp.LocalAddr().(*net.UDPAddr).Port)}
	received := func() bool {
		_ = udp.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, _, err := udp.ReadFrom(make([]byte, 16))
		return err == nil
	}
	runExec(t, bin, tr.execution(""), nil, nil, send...)
	if !received() {
		t.Fatal("with the network allowed, the datagram never arrived: the test proves nothing")
	}
	runExec(t, bin, tr.execution("none"), nil, nil, send...)
	if received() {
		t.Error("with network none, a UDP datagram reached the test's loopback port")
	}

	// A unix socket outside the scopes is out of reach too.
	sock := filepath.Join(tr.outside, "agent.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	r := runExec(t, bin, tr.execution("none"), nil, nil, "python3", "-c",
		fmt.Sprintf("import socket; s = socket.socket(socket.AF_UNIX); s.connect(%q); print('CONNECTED')", sock))
	if strings.Contains(r.stdout, "CONNECTED") || r.code == 0 {
		t.Errorf("with network none, a unix socket outside the scopes was reached\n%s", r.stderr)
	}
}

// `: ${PS4:='$(rm -rf …)'}; set -x` runs rm -rf through a prompt the
// analysis cannot see; confined, it cannot reach outside write_paths.
func TestExecRmRfThroughPS4(t *testing.T) {
	probeKernel(t)
	needPrograms(t, "bash")
	tr := newTree(t)
	bin := binary(t)
	shape := func(dir string) []string {
		// bash sets PS4 to "+ " itself: unset, the := assigns.
		return []string{"bash", "-c", "unset PS4; : ${PS4:='$(rm -rf " + dir + ")'}; set -x; true"}
	}
	inside := filepath.Join(tr.work, "victim-in")
	runExec(t, bin, tr.execution("none"), nil, nil, shape(inside)...)
	if _, err := os.Stat(inside); err == nil {
		t.Fatalf("the PS4 shape did not remove %s inside write_paths: it does not run rm -rf, the test proves nothing", inside)
	}
	victim := filepath.Join(tr.outside, "victim")
	r := runExec(t, bin, tr.execution("none"), nil, nil, shape(victim)...)
	if _, err := os.Stat(filepath.Join(victim, "a.txt")); err != nil {
		t.Errorf("rm -rf through PS4 removed %s outside write_paths: %v\n%s", victim, err, r.stderr)
	}
	r = runExec(t, bin, tr.execution("none"), nil, nil, shape(filepath.Join(tr.work, ".git"))...)
	if _, err := os.Stat(filepath.Join(tr.work, ".git/config")); err != nil {
		t.Errorf("rm -rf through PS4 removed .git inside write_paths: %v\n%s", err, r.stderr)
	}
}

func TestExecEnvironmentIsExactlyTheConstructedOne(t *testing.T) {
	probeKernel(t)
	tr := newTree(t)
	r := runExec(t, binary(t), tr.execution("none"), []string{"TOOLPDP_TEST_PARENT_SECRET=leaked"}, nil, "/usr/bin/env")
	var keys []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		k, _, _ := strings.Cut(line, "=")
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if want := []string{"HOME", "LANG", "PATH", "TMPDIR"}; !slices.Equal(keys, want) {
		t.Errorf("the command's environment has %q, want exactly %q\n%s", keys, want, r.stdout)
	}
	if strings.Contains(r.stdout, "leaked") {
		t.Error("a parent variable leaked into the command's environment")
	}
	// The cwd is the pinned one.
	r = runExec(t, binary(t), tr.execution("none"), nil, nil, "/bin/pwd")
	if got := strings.TrimSpace(r.stdout); got != tr.work {
		t.Errorf("pwd %q, want the pinned cwd %q", got, tr.work)
	}
}

// `(sleep 300 &)` does not outlive the command, with a PID namespace and
// without one (the subreaper).
func TestExecEndsTheProcessTree(t *testing.T) {
	probeKernel(t)
	needPrograms(t, "bash", "sleep")
	tr := newTree(t)
	for name, bin := range map[string]string{"pid namespace": binary(t), "subreaper": simulatedBinary(t, "userns")} {
		t.Run(name, func(t *testing.T) {
			marker := fmt.Sprintf("toolpdp-test-sleeper-%d", time.Now().UnixNano())
			start := time.Now()
			r := runExec(t, bin, tr.execution("none"), nil, []string{"--best-effort"}, "bash", "-c", "(exec -a "+marker+" sleep 300 &); echo started")
			if !strings.Contains(r.stdout, "started") {
				t.Fatalf("the command did not run\n%s", r.stderr)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("exec took %v: it waited for the background sleep", d)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				left := processesNamed(marker)
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("the background sleep outlived the command: pids %v", left)
					for _, pid := range left {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// processesNamed lists the processes whose command line holds marker.
func processesNamed(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, pid)
		}
	}
	return out
}

// On a kernel without Landlock (simulated by a test build) the run is
// refused with 126 naming what is missing; --best-effort runs it and still
// names every part left unenforced.
func TestExecWithoutLandlockRefuses(t *testing.T) {
	probeKernel(t)
	tr := newTree(t)
	bin := simulatedBinary(t, "landlock")
	marker := filepath.Join(tr.work, "ran")
	r := runExec(t, bin, tr.execution("none"), nil, nil, "bash", "-c", "touch "+marker)
	if r.code != 126 {
		t.Errorf("exit %d, want 126\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "refused") || !strings.Contains(r.stderr, "no Landlock") {
		t.Errorf("stderr does not say Landlock is missing:\n%s", r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although the run was refused")
	}
	if r.report["refused"] != true {
		t.Errorf("report: refused %v, want true", r.report["refused"])
	}
	missing := fmt.Sprint(r.report["missing"])
	if !strings.Contains(missing, "writes") || !strings.Contains(missing, "reads") {
		t.Errorf("report's missing %s does not name writes and reads", missing)
	}

	r = runExec(t, bin, tr.execution("none"), nil, []string{"--best-effort"}, "bash", "-c", "touch "+marker)
	if r.code != 0 {
		t.Errorf("--best-effort: exit %d, want 0\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("--best-effort did not run the command")
	}
	if !strings.Contains(r.stderr, "writes: NOT enforced") || !strings.Contains(r.stderr, "best effort: running without") {
		t.Errorf("--best-effort does not name what it left unenforced:\n%s", r.stderr)
	}
}

// Without a mount namespace the protected names cannot be kept
// read-only: refused, unless --best-effort, which says so.
func TestExecWithoutNamespacesRefusesProtectedNames(t *testing.T) {
	probeKernel(t)
	tr := newTree(t)
	bin := simulatedBinary(t, "userns")
	r := runExec(t, bin, tr.execution("none"), nil, nil, "true")
	if r.code != 126 || !strings.Contains(r.stderr, "read_only_names: NOT enforced") {
		t.Errorf("exit %d, want 126 naming read_only_names\n%s", r.code, r.stderr)
	}
	// Files and network stay confined by Landlock and seccomp alone.
	ln := loopbackListener(t)
	r = runExec(t, bin, tr.execution("none"), nil, []string{"--best-effort"}, "bash", "-c",
		fmt.Sprintf("echo x > %s/new.txt; exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED", tr.outside, ln.port))
	if strings.Contains(r.stdout, "CONNECTED") || ln.count.Load() != 0 {
		t.Errorf("without namespaces, network none was not enforced\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(tr.outside, "new.txt")); err == nil {
		t.Error("without namespaces, a write outside write_paths succeeded")
	}
}

// Decide's answer is exec's input: `toolpdp decide` prints the response,
// `toolpdp exec --execution -` runs the command inside its scopes.
func TestExecRunsWhatDecideAllowed(t *testing.T) {
	probeKernel(t)
	tr := newTree(t)
	bundle := t.TempDir()
	def := `{"agents": {"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}},
	         "guardrails": {"protected_paths": [".env"]}}`
	if err := os.WriteFile(filepath.Join(bundle, "data.json"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	req := fmt.Sprintf(`{"agentId": "coder", "toolName": "Bash", "args": {"command": "echo hi"}, "env": {"PATH": "/usr/bin:/bin", "SECRET": "s"},
		"executionPolicy": {"cwd": %q, "readPaths": {"paths": [%q]}, "writePaths": {"paths": [%q]}, "network": "none",
		"env": {"mode": "allowlist", "names": ["PATH"]}}}`, tr.work, tr.work, tr.work)
	bin := binary(t)
	decide := exec.Command(bin, "decide", "--bundle", bundle)
	decide.Stdin = strings.NewReader(req)
	resp, err := decide.Output()
	if err != nil {
		t.Fatalf("decide: %v\n%s", err, resp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, bin, "exec", "--execution", "-", "--", "bash", "-c",
		"echo ok > ok.txt; cat .env; echo x > .git/config; echo x > "+tr.outside+"/new.txt; env")
	run.Stdin = bytes.NewReader(resp)
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	_ = run.Run()
	if _, err := os.Stat(filepath.Join(tr.work, "ok.txt")); err != nil {
		t.Fatalf("the allowed command did not run: %v\n%s\n%s", err, resp, stderr.String())
	}
	for _, bad := range []string{"secret-in-env", "SECRET="} {
		if strings.Contains(stdout.String(), bad) {
			t.Errorf("stdout holds %q:\n%s", bad, stdout.String())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(tr.work, ".git/config")); string(b) != "[core]\n" {
		t.Errorf(".git/config is now %q", b)
	}
	if _, err := os.Stat(filepath.Join(tr.outside, "new.txt")); err == nil {
		t.Error("a write outside write_paths succeeded")
	}
	if !strings.Contains(stderr.String(), "network: enforced") {
		t.Errorf("the report does not show network none enforced:\n%s", stderr.String())
	}
}

// A descriptor the caller left open does not reach the command: the
// kernel checks a path when it is opened, so an inherited one would pass
// every confinement.
func TestExecClosesInheritedDescriptors(t *testing.T) {
	probeKernel(t)
	tr := newTree(t)
	leak, err := os.Create(filepath.Join(tr.outside, "leaked.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	b, _ := protojson.Marshal(tr.execution("none"))
	exFile := filepath.Join(t.TempDir(), "execution.json")
	if err := os.WriteFile(exFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "exec", "--execution", exFile, "--", "bash", "-c", "echo through-fd >&3 && echo WROTE")
	cmd.ExtraFiles = []*os.File{leak} // fd 3
	out, _ := cmd.CombinedOutput()
	if got, _ := os.ReadFile(leak.Name()); len(got) > 0 || strings.Contains(string(out), "WROTE") {
		t.Errorf("the command wrote through an inherited descriptor: file %q\n%s", got, out)
	}
}

// No execution document, however malformed, crashes exec's reader or
// passes for something it is not.
func FuzzReadExecution(f *testing.F) {
	f.Add([]byte(`{"env": {"A": "1"}, "envEnforced": true, "cwd": "/w", "network": "none"}`))
	f.Add([]byte(`{"decision": "DECISION_ALLOW", "execution": {"writePaths": {"paths": []}}}`))
	f.Add([]byte(`{"decision": "DECISION_ASK"}`))
	f.Add([]byte(`{"network": "loopback"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := readExecution("-", bytes.NewReader(b)); err != nil {
			return
		}
		var ex pb.Execution
		if protojson.Unmarshal(b, &ex) == nil && ex.GetNetwork() != "" && ex.GetNetwork() != "none" {
			t.Fatalf("network %q accepted", ex.GetNetwork())
		}
	})
}

// An execution whose network is decided per connection carries its rules
// to the proxy; "any" is an unrestricted network.
func TestExecReadsNetworkRules(t *testing.T) {
	s, err := specOf(&pb.Execution{Network: "rules", NetworkRules: &pb.NetworkRules{Allow: []string{"proxy.golang.org"}}})
	if err != nil || s.NetRules == nil || len(s.NetRules.Allow) != 1 {
		t.Errorf("network rules: %+v %v", s, err)
	}
	if _, err := specOf(&pb.Execution{Network: "rules"}); err == nil {
		t.Error("network rules without rules were accepted")
	}
	if s, err := specOf(&pb.Execution{Network: "any"}); err != nil || s.NoNetwork || s.NetRules != nil {
		t.Errorf("network any: %+v %v, want an unrestricted network", s, err)
	}
}

// Package loadchild runs a bundle's load — compiling it, evaluating the
// index, running its own tests — in a child process, under a deadline and
// a memory bound the kernel enforces, before the serving process loads the
// same content itself. Go has no per-evaluation memory cap and OPA checks
// cancellation only now and then, so a hostile rule (count(numbers.range(1,
// 1e9))) can only be bounded from outside: the child is killed when it
// passes either bound, and the serving process never starts that load.
//
// The parent hands the child the bundle files it read and hashed (a
// bundles.Frozen), so the child loads exactly that content and reads
// nothing itself; the child reports its stage and each test it starts, so
// a killed load names what it was doing.
package loadchild

import (
	"bufio"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolpdp/toolpdp/pdp/bundles"
)

// Defaults of Config.
const (
	DefaultTimeout = 30 * time.Second
	// DefaultMemoryBytes is the child's bound on what its load allocates:
	// with the serving process (about 45 MiB) it keeps the pod under the
	// shipped 128 Mi limit.
	DefaultMemoryBytes = 48 << 20
	// backstop is what the parent's own bound on the child adds to
	// MemoryBytes: the child's mappings before it loads anything (the
	// binary's BSS and the runtime's reservations, ~70 MiB, nearly none
	// of it resident), which the child's tighter bound measures exactly.
	backstop = 128 << 20
)

// Config says how to start the child and what bounds it.
type Config struct {
	// Command runs Serve: the binary and its arguments (toolpdp's own
	// executable and its hidden load-child command); Check adds the
	// memory bound as the last argument.
	Command []string
	Timeout time.Duration // the whole load; DefaultTimeout when zero
	// MemoryBytes bounds what the child's load may allocate: the child
	// sets its RLIMIT_DATA (the heap and every private writable mapping)
	// to its mappings at start plus this before it reads the bundle, and
	// its GOMEMLIMIT to this; DefaultMemoryBytes when zero.
	MemoryBytes int64
}

// Request is what the child loads.
type Request struct {
	Frozen          *bundles.Frozen
	WarnUnknownKeys bool
	TestTimeout     time.Duration
}

// ErrRejected marks a load the child refused or could not finish: the
// bundle is rejected.
var ErrRejected = errors.New("rejected")

// Check loads req in a child process and returns nil when it loaded and
// its tests passed; otherwise an error saying why (the child's own error,
// or which bound it passed and what it was doing then).
func Check(ctx context.Context, c Config, req Request) error {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MemoryBytes <= 0 {
		c.MemoryBytes = DefaultMemoryBytes
	}
	if len(c.Command) == 0 {
		return errors.New("loadchild: no command to run the child")
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cmd := exec.Command(c.Command[0], append(c.Command[1:], strconv.FormatInt(c.MemoryBytes, 10))...)
	// The child's collector works hard before the rlimit: a load that fits
	// the budget is not killed for garbage it could have collected. One
	// processor: the serving process keeps the other.
	cmd.Env = append(os.Environ(), fmt.Sprintf("GOMEMLIMIT=%d", c.MemoryBytes), "GOGC=50", "GOMAXPROCS=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr := &head{max: 4096}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("loadchild: start %s: %w", c.Command[0], err)
	}
	// A first bound, set before the child is handed anything to load
	// (until it reads its request, it has only started); the child then
	// tightens it to exactly MemoryBytes more than it maps at start.
	if err := limitChild(cmd.Process.Pid, c.MemoryBytes+backstop); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("loadchild: bound the child's memory: %w", err)
	}
	go func() {
		_ = gob.NewEncoder(stdin).Encode(req)
		stdin.Close()
	}()
	p := &progress{}
	done := make(chan struct{})
	go func() { p.read(stdout); close(done) }()
	waited := make(chan error, 1)
	go func() { <-done; waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-waited
		return fmt.Errorf("%w: the load did not finish within %s (--load-timeout)%s", ErrRejected, c.Timeout, p.doing())
	}
	if res, ok := p.outcome(); ok {
		if res.Error != "" {
			return fmt.Errorf("%w: %s", ErrRejected, res.Error)
		}
		return nil
	}
	if why := stderr.String(); memoryFailure(why) {
		return fmt.Errorf("%w: the load passed its memory budget of %d MiB (--load-memory-mb)%s; the runtime said: %s", ErrRejected, c.MemoryBytes>>20, p.doing(), why)
	}
	return fmt.Errorf("%w: the load ended without a result (%v)%s: %s", ErrRejected, err, p.doing(), stderr.String())
}

// memoryFailure reports whether the first words of a dead child say that
// an allocation failed: the Go runtime's own, or a fault of code that
// could not get memory (a thread's stack, cgo's malloc).
func memoryFailure(why string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory", "failed to create new OS thread", "SIGSEGV"} {
		if strings.Contains(why, s) {
			return true
		}
	}
	return false
}

// result is the child's last line.
type result struct {
	Error string `json:"error,omitempty"`
}

// The child's lines: "stage WHAT", "start TEST", "result JSON".
type progress struct {
	mu    sync.Mutex
	stage string
	test  string // the last test started
	res   *result
}

func (p *progress) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		p.mu.Lock()
		switch kind {
		case "stage":
			p.stage = rest
		case "start":
			p.test = rest
		case "result":
			var res result
			if json.Unmarshal([]byte(rest), &res) == nil {
				p.res = &res
			}
		}
		p.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

func (p *progress) outcome() (result, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.res == nil {
		return result{}, false
	}
	return *p.res, true
}

// doing says what the child was doing: its stage, and the tests running.
func (p *progress) doing() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stage == "" {
		return ""
	}
	s := ", while " + p.stage
	if p.test != "" {
		s += " (the last test started: " + p.test + ")"
	}
	return s
}

// head keeps the first max bytes written: where the Go runtime says why
// it ended ("fatal error: runtime: out of memory"), before its stacks.
type head struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (h *head) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// String is the first line that says what happened.
func (h *head) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, line := range strings.Split(string(h.b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// ErrNotAllowed is returned by Command for a decision that is not an allow.
var ErrNotAllowed = errors.New("the decision is not an allow")

// ErrConfinementUnavailable is returned by Command when a confined run was
// asked for and toolpdp exec cannot be found: such a run never goes
// ahead unconfined.
var ErrConfinementUnavailable = errors.New("toolpdp exec is required to confine the command and was not found")

// RunOptions say how an allowed command runs.
type RunOptions struct {
	// Confine runs the command through `toolpdp exec`: the kernel confines
	// it to the execution's scopes (writes only under write_paths, reads
	// only under read_paths, no network when the policy forbids it). Where
	// the kernel cannot, toolpdp exec refuses the run with exit code 126.
	Confine bool
	// Toolpdp is the toolpdp binary (a path, or a name looked up on PATH);
	// "toolpdp" when "".
	Toolpdp string
	// BestEffort lets a confined run go ahead when the kernel cannot
	// enforce every part; the report names each one left out.
	BestEffort bool
	// Report is a file for toolpdp exec's JSON report; none when "".
	Report string
}

// Command is the command an allowed decision runs: with exactly its
// execution's environment when that is enforced (else this process's), in
// its pinned cwd, and with opt.Confine inside `toolpdp exec`. A decision
// that is not an allow is ErrNotAllowed; a confined run without toolpdp is
// ErrConfinementUnavailable. Start it as any exec.Cmd; its stdin, stdout
// and stderr are the command's.
func Command(ctx context.Context, resp *pb.DecideResponse, opt RunOptions, name string, args ...string) (*exec.Cmd, error) {
	if resp.GetDecision() != pb.Decision_DECISION_ALLOW {
		return nil, fmt.Errorf("%w: %s", ErrNotAllowed, resp.GetMessage())
	}
	ex := resp.GetExecution()
	if !opt.Confine {
		cmd := exec.CommandContext(ctx, name, args...)
		if ex.GetEnvEnforced() {
			cmd.Env = envList(ex.GetEnv())
		}
		cmd.Dir = ex.GetCwd()
		return cmd, nil
	}
	bin := opt.Toolpdp
	if bin == "" {
		bin = "toolpdp"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfinementUnavailable, err)
	}
	if ex == nil {
		ex = &pb.Execution{}
	}
	payload, err := protojson.Marshal(ex)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// The execution travels on a pipe of its own (fd 3), so the command
	// keeps its stdin; the writer ends when toolpdp exec has read it or gone.
	go func() {
		_, _ = w.Write(payload)
		w.Close()
	}()
	argv := []string{"exec", "--execution", "/dev/fd/3"}
	if opt.BestEffort {
		argv = append(argv, "--best-effort")
	}
	if opt.Report != "" {
		argv = append(argv, "--report", opt.Report)
	}
	cmd := exec.CommandContext(ctx, path, append(append(argv, "--", name), args...)...)
	cmd.ExtraFiles = []*os.File{r}
	// toolpdp exec gives the command its env itself; toolpdp runs with this
	// process's, never a constructed one that might load code into it.
	cmd.Dir = ex.GetCwd()
	return cmd, nil
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

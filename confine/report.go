package confine

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Report says what a run enforced and what it could not.
type Report struct {
	Kernel     Kernel   `json:"kernel"`
	Parts      []Part   `json:"parts"`
	BestEffort bool     `json:"best_effort"`
	Refused    bool     `json:"refused"`           // the command did not run: a required part was missing
	Missing    []string `json:"missing,omitempty"` // the required parts not enforced
	TempDir    string   `json:"tmpdir,omitempty"`  // the private TMPDIR, removed after the run
	// ReadOnly and Unreadable are the protected entries found in the roots
	// and mounted read-only or masked.
	ReadOnly   []string `json:"read_only,omitempty"`
	Unreadable []string `json:"unreadable,omitempty"`
	// Created lists protected names inside the write roots that the run
	// created (a mount protects only what exists when the run starts).
	Created  []string `json:"created_protected,omitempty"`
	ExitCode *int     `json:"exit_code,omitempty"`
	// NetworkHosts are the hosts a run whose network is decided per
	// connection decided, as its proxy records them (set by the caller).
	NetworkHosts any `json:"network_hosts,omitempty"`
}

// Kernel is what the probe found and the run could set up.
type Kernel struct {
	LandlockABI     int    `json:"landlock_abi"`
	UserNamespace   bool   `json:"user_namespace"`
	MountNamespace  bool   `json:"mount_namespace"`
	PIDNamespace    bool   `json:"pid_namespace"`
	NetNamespace    bool   `json:"network_namespace"`
	IPCNamespace    bool   `json:"ipc_namespace"`
	Seccomp         bool   `json:"seccomp"`
	SimulatedAbsent string `json:"simulated_absent,omitempty"` // a test build's pretence
}

// Part is one confinement: whether the execution asks for it, whether it
// is enforced, by which kernel mechanisms, and what is missing.
type Part struct {
	Name     string   `json:"name"`
	Asked    bool     `json:"asked"`
	Enforced bool     `json:"enforced"`
	By       []string `json:"by,omitempty"`
	Missing  string   `json:"missing,omitempty"`
}

// The parts, by name.
const (
	PartWrites          = "writes"           // writes only under write_paths (and TMPDIR, the profile's devices)
	PartReads           = "reads"            // reads only under read_paths, write_paths, TMPDIR and the profile
	PartReadOnlyNames   = "read_only_names"  // protected names stay read-only inside the write roots
	PartUnreadableNames = "unreadable_names" // protected_paths entries neither read nor written
	PartNetwork         = "network"          // no socket leaves the run
	PartNoNewPrivileges = "no_new_privileges"
	PartProcessTree     = "process_tree" // every process the command started ends with it
	PartEnvironment     = "environment"  // exactly the constructed environment, plus TMPDIR
	PartTempDir         = "tmpdir"       // a private TMPDIR, removed afterwards
	PartCwd             = "cwd"
	PartIPC             = "ipc"  // signals and abstract sockets stay inside the run
	PartProc            = "proc" // /proc shows the run's processes only
)

func (r *Report) part(name string) *Part {
	for i := range r.Parts {
		if r.Parts[i].Name == name {
			return &r.Parts[i]
		}
	}
	r.Parts = append(r.Parts, Part{Name: name})
	return &r.Parts[len(r.Parts)-1]
}

func (r *Report) enforced(name string, asked bool, by ...string) {
	p := r.part(name)
	p.Asked, p.Enforced, p.By, p.Missing = asked, true, by, ""
}

func (r *Report) notEnforced(name string, asked bool, missing string, by ...string) {
	p := r.part(name)
	p.Asked, p.Enforced, p.By, p.Missing = asked, false, by, missing
}

// settle lists the asked parts left unenforced and decides the refusal.
func (r *Report) settle() {
	r.Missing = nil
	for _, p := range r.Parts {
		if p.Asked && !p.Enforced {
			r.Missing = append(r.Missing, fmt.Sprintf("%s: %s", p.Name, p.Missing))
		}
	}
	r.Refused = len(r.Missing) > 0 && !r.BestEffort
}

// WriteText writes the report for a person, one line per part, each
// prefixed with prefix.
func (r *Report) WriteText(w io.Writer, prefix string) {
	k := r.Kernel
	fmt.Fprintf(w, "%skernel: landlock ABI %d, user namespace %v, mount %v, pid %v, network %v, ipc %v, seccomp %v\n",
		prefix, k.LandlockABI, k.UserNamespace, k.MountNamespace, k.PIDNamespace, k.NetNamespace, k.IPCNamespace, k.Seccomp)
	if k.SimulatedAbsent != "" {
		fmt.Fprintf(w, "%s(a test build simulates a kernel without %s)\n", prefix, k.SimulatedAbsent)
	}
	for _, p := range r.Parts {
		state := "enforced"
		if !p.Enforced {
			state = "NOT enforced"
		}
		if !p.Asked {
			state += " (not asked)"
		}
		line := fmt.Sprintf("%s%s: %s", prefix, p.Name, state)
		if len(p.By) > 0 {
			line += " by " + strings.Join(p.By, ", ")
		}
		if p.Missing != "" {
			line += ": " + p.Missing
		}
		fmt.Fprintln(w, line)
	}
	for _, c := range r.Created {
		fmt.Fprintf(w, "%swarning: the run created the protected entry %s (a mount protects only what exists when the run starts)\n", prefix, c)
	}
	switch {
	case r.Refused:
		fmt.Fprintf(w, "%srefused: the kernel cannot enforce %s (--best-effort runs anyway)\n", prefix, strings.Join(r.Missing, "; "))
	case len(r.Missing) > 0:
		fmt.Fprintf(w, "%sbest effort: running without %s\n", prefix, strings.Join(r.Missing, "; "))
	}
}

// JSON is the report as an indented JSON document.
func (r *Report) JSON() []byte {
	b, _ := json.MarshalIndent(r, "", "  ")
	return append(b, '\n')
}

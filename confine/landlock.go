package confine

import (
	"errors"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// simulateAbsent is set only when a test builds the binary (go build
// -ldflags "-X github.com/toolpdp/toolpdp/confine.simulateAbsent=landlock"):
// "landlock" makes the probe find no Landlock, "userns" no namespaces,
// "landlock,userns" neither. Release builds leave it empty, and nothing
// at run time can set it.
var simulateAbsent string

func simulated(what string) bool {
	for _, s := range splitComma(simulateAbsent) {
		if s == what {
			return true
		}
	}
	return false
}

// landlockABI is the kernel's Landlock ABI version; 0 without Landlock.
func landlockABI() int {
	if simulated("landlock") {
		return 0
	}
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// fsRules are the file system rights of a run, by path; each path is
// known to exist and whether it is a directory.
type fsRules struct {
	ReadDirs, ReadFiles     []string // read and execute
	WriteDirs, WriteFiles   []string // read, write, create, remove, rename within
	WriteOnly               []string // write rights without read: writes not enforced while reads are
	TerminalDirs, Terminals []string // write plus device ioctls
	// Handled is false when neither reads nor writes are confined: no
	// file system rule at all.
	Handled bool
}

// readRights and writeRights are the rights of the read and the write
// roots; a directory's rights cover everything below it.
var (
	readRights  = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	writeRights = landlock.AccessFSSet(ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
		ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSTruncate | ll.AccessFSRefer)
)

// landlockConfigs are go-landlock's presets by ABI version: a run uses
// every right its kernel knows, and knows which ones those are.
var landlockConfigs = []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5,
	landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}

// restrictLandlock confines this process and what it starts: the file
// rules, all TCP and UDP when net is set (no network namespace could be
// had), and the IPC scopes (abstract unix sockets and signals reach
// nothing outside the run) — each as far as the kernel's ABI goes; the
// report reads the ABI to say what that leaves out. Rights are cut to the
// ABI here rather than by go-landlock's best effort, which gives up on
// the whole ruleset when one rule asks for a right the kernel lacks.
func restrictLandlock(abi int, r fsRules, net bool) error {
	if abi < 1 {
		return errors.New("the kernel has no Landlock")
	}
	preset := landlockConfigs[min(abi, len(landlockConfigs))-1]
	cfg := landlock.Config{Scoped: preset.Scoped}
	if r.Handled {
		cfg.HandledAccessFS = preset.HandledAccessFS
	}
	if net {
		cfg.HandledAccessNet = preset.HandledAccessNet
	}
	var rules []landlock.Rule
	add := func(rights landlock.AccessFSSet, paths []string) {
		if rights &= cfg.HandledAccessFS; rights != 0 && len(paths) > 0 {
			rules = append(rules, landlock.PathAccess(rights, paths...))
		}
	}
	if r.Handled {
		fileOnly := landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev)
		add(readRights, r.ReadDirs)
		add(readRights&fileOnly, r.ReadFiles)
		add(readRights|writeRights|ll.AccessFSResolveUnix, r.WriteDirs)
		add((readRights|writeRights)&fileOnly, r.WriteFiles)
		add(writeRights, r.WriteOnly)
		add(readRights|writeRights|ll.AccessFSIoctlDev, r.TerminalDirs)
		add((readRights|writeRights|ll.AccessFSIoctlDev)&fileOnly, r.Terminals)
	}
	if cfg.HandledAccessFS == 0 && cfg.HandledAccessNet == 0 && cfg.Scoped == 0 {
		return nil
	}
	return cfg.Restrict(rules...)
}

func isDir(p string) (dir, ok bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return false, false
	}
	return fi.IsDir(), true
}

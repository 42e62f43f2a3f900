package confine

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// protectedFound are the protected entries the walk found in the roots.
type protectedFound struct {
	readOnly, unreadable     []string
	roTruncated, unTruncated bool
}

// compose fills the report from what the run asked for and what its
// process could set up.
func compose(rep *Report, spec *Spec, p *plan, flags uintptr, nsErr error, st status, found protectedFound, maxWalk int) {
	done := map[string]bool{}
	for _, d := range st.Done {
		done[d] = true
	}
	k := &rep.Kernel
	k.UserNamespace = flags&unix.CLONE_NEWUSER != 0
	k.MountNamespace = p.Mounts && done[stepPrivate]
	k.PIDNamespace, k.NetNamespace, k.IPCNamespace = p.PIDs, p.Net, flags&unix.CLONE_NEWIPC != 0
	k.Seccomp = done[stepSeccomp]
	noMounts := "needs a mount namespace of the run's own"
	switch {
	case !p.Mounts && nsErr != nil:
		noMounts += " (" + nsErr.Error() + ")"
	case p.Mounts && !done[stepPrivate]:
		noMounts += " (" + st.Failed[stepPrivate] + ")"
	}

	landlockBy := fmt.Sprintf("landlock ABI %d", k.LandlockABI)
	landlockMissing := ""
	switch {
	case k.LandlockABI == 0:
		landlockMissing = "the kernel has no Landlock"
	case !done[stepLandlock]:
		landlockMissing = "Landlock failed: " + st.Failed[stepLandlock]
	}
	scope := func(name string, set bool, key string, needABI int, needWhat string) {
		switch {
		case !set:
			rep.notEnforced(name, false, key+" is not set")
		case landlockMissing != "":
			rep.notEnforced(name, true, landlockMissing)
		case k.LandlockABI < needABI:
			rep.notEnforced(name, true, fmt.Sprintf("%s needs Landlock ABI %d (the kernel has %d)", needWhat, needABI, k.LandlockABI), landlockBy)
		default:
			rep.enforced(name, true, landlockBy)
		}
	}
	scope(PartWrites, spec.WritePaths != nil, "write_paths", 3, "truncating files outside write_paths")
	scope(PartReads, spec.ReadPaths != nil, "read_paths", 1, "")

	names := func(part string, list []string, found []string, step string, trunc bool, by string) {
		if len(list) == 0 {
			return
		}
		var failed []string
		for _, f := range found {
			if e, ok := st.Failed[step+f]; ok {
				failed = append(failed, e)
			}
		}
		switch {
		case trunc:
			rep.notEnforced(part, true, fmt.Sprintf("the roots hold more than %d entries: not every protected entry was found (narrow the scopes)", maxWalk))
		case len(found) == 0:
			rep.enforced(part, true, "none exists in the roots")
		case !k.MountNamespace:
			rep.notEnforced(part, true, fmt.Sprintf("%d found, but keeping them %s", len(found), noMounts))
		case len(failed) > 0:
			rep.notEnforced(part, true, strings.Join(failed, "; "))
		default:
			rep.enforced(part, true, fmt.Sprintf("%s (%d found)", by, len(found)))
		}
	}
	names(PartReadOnlyNames, spec.ReadOnlyNames, found.readOnly, stepReadOnly, found.roTruncated, "read-only bind mounts")
	names(PartUnreadableNames, spec.UnreadableNames, found.unreadable, stepMask, found.unTruncated, "masking mounts")
	rep.ReadOnly, rep.Unreadable = found.readOnly, found.unreadable

	switch {
	case spec.Proxy != nil && !p.Relay:
		rep.notEnforced(PartNetwork, true, "network rules need a network namespace of the run's own, which this node does not give ("+flagNames(flags)+"); without it no connection could reach the proxy alone")
	case spec.Proxy != nil && !done[stepRelay]:
		rep.notEnforced(PartNetwork, true, "the proxy's relay could not listen in the run's network namespace: "+st.Failed[stepRelay])
	case spec.Proxy != nil && !done[stepSeccomp]:
		rep.notEnforced(PartNetwork, true, "seccomp failed: "+st.Failed[stepSeccomp])
	case spec.Proxy != nil:
		rep.enforced(PartNetwork, true, fmt.Sprintf("network namespace (loopback only), each connection decided by the proxy at 127.0.0.1:%d (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY)", ProxyPort),
			"seccomp (socket families)")
	case spec.NoNetwork:
		var by []string
		if p.Net {
			by = append(by, "network namespace")
		}
		if p.LandlockIP && done[stepLandlock] {
			by = append(by, landlockBy+" (TCP)")
		}
		switch {
		case !done[stepSeccomp]:
			rep.notEnforced(PartNetwork, true, "seccomp failed: "+st.Failed[stepSeccomp], by...)
		default:
			sock := "seccomp (socket families; unix sockets refused)"
			if p.Sockets.Unix {
				sock = "seccomp (socket families)"
				by = append(by, landlockBy+" (unix sockets)")
			}
			rep.enforced(PartNetwork, true, append(by, sock)...)
		}
	default:
		rep.notEnforced(PartNetwork, false, "network is not forbidden")
	}

	switch {
	case !done[stepNoNewPrivs]:
		rep.notEnforced(PartNoNewPrivileges, true, st.Failed[stepNoNewPrivs])
	case !done[stepCaps]:
		rep.notEnforced(PartNoNewPrivileges, true, "dropping capabilities: "+st.Failed[stepCaps], "no_new_privs")
	default:
		rep.enforced(PartNoNewPrivileges, true, "no_new_privs", "no capabilities")
	}
	if p.PIDs {
		rep.enforced(PartProcessTree, true, "PID namespace", "subreaper")
	} else {
		rep.enforced(PartProcessTree, true, "subreaper")
	}
	if spec.EnvEnforced {
		rep.enforced(PartEnvironment, true, "exactly the execution's env, plus TMPDIR")
	} else {
		rep.notEnforced(PartEnvironment, false, "env_enforced is false: the caller's environment, plus TMPDIR")
	}
	rep.enforced(PartTempDir, true, rep.TempDir)
	if spec.Cwd != "" {
		rep.enforced(PartCwd, true, spec.Cwd)
	} else {
		rep.notEnforced(PartCwd, false, "no cwd pinned: the caller's")
	}
	switch {
	case done[stepProc]:
		rep.enforced(PartProc, false, "a /proc of the run's PID namespace")
	case st.Failed[stepProc] != "":
		rep.notEnforced(PartProc, false, st.Failed[stepProc]+": /proc shows the caller's processes (their command lines; Landlock keeps the rest out of reach)")
	default:
		rep.notEnforced(PartProc, false, "no PID and mount namespace: /proc shows the caller's processes")
	}
	var ipc []string
	if k.IPCNamespace {
		ipc = append(ipc, "IPC namespace")
	}
	if done[stepLandlock] && k.LandlockABI >= 6 {
		ipc = append(ipc, landlockBy+" (signals, abstract unix sockets)")
	}
	if len(ipc) > 0 {
		rep.enforced(PartIPC, false, ipc...)
	} else {
		rep.notEnforced(PartIPC, false, "needs Landlock ABI 6 or an IPC namespace")
	}
}

// Package confine runs one command inside the scopes a policy decided:
// writes only under the write roots, reads only under the read roots and a
// profile of what shells and toolchains need, protected names read-only or
// unreadable, no network when it is forbidden, no new privileges, exactly
// the constructed environment and a private TMPDIR, and the whole process
// tree ended when the command ends.
//
// The kernel does the confining: Landlock for files (and TCP where no
// network namespace can be had), seccomp for socket families and the
// system calls that would bypass the rest, and, where the node allows them,
// user, mount, PID, IPC and network namespaces. A run is two processes of
// the same binary: the caller's, which probes the kernel, starts the second
// in new namespaces, reports and reaps; and the second, which sets up its
// mounts, confines itself and starts the command as its child (it is PID 1
// of the run's PID namespace, so its exit ends every process the command
// left behind).
//
// Every part the execution asks for is reported as enforced (and by what)
// or not (and why); a run whose required parts the kernel cannot enforce
// is refused unless best effort was asked for.
package confine

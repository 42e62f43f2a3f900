package envguard

import (
	"path"
	"strings"
)

// devKind is what a path names once the kernel (or bash, for /dev/tcp)
// resolves it, for the paths that are not plain files.
type devKind uint8

const (
	devNone    devKind = iota
	devStdin           // the process's stdin or another open descriptor
	devNetwork         // bash's /dev/tcp/HOST/PORT and /dev/udp/HOST/PORT
)

// devPath classifies p as the kernel would resolve it: /dev//stdin,
// /dev/./fd/3, /dev/../dev/stdin, /proc/self/fd/0, /proc/1/root/dev/stdin
// are all descriptors. A relative path is judged by what it could reach
// from any working directory: enough ../ segments reach /, and a
// directory of /dev or /proc may be the cwd (stdin, fd/3, self/fd/0).
func devPath(p string) devKind {
	if p == "-" {
		return devStdin
	}
	if p == "" {
		return devNone
	}
	if rest, ok := procCwd(p); ok {
		// /proc/self/cwd/../../dev/stdin: the kernel follows the cwd link
		// first, so its ../ climb from wherever the cwd is.
		return devPath(rest)
	}
	c := path.Clean(p)
	if !path.IsAbs(c) {
		for c == ".." || strings.HasPrefix(c, "../") {
			c = strings.TrimPrefix(strings.TrimPrefix(c, ".."), "/")
		}
		if k := relativeDev(c); k != devNone {
			return k
		}
		c = "/" + c
	}
	for range 8 {
		// /proc/PID/root is the process's root directory; /proc/PID/cwd
		// its working directory, which may be anywhere.
		segs := strings.Split(strings.TrimPrefix(c, "/"), "/")
		if len(segs) >= 3 && segs[0] == "proc" && (segs[2] == "root" || segs[2] == "cwd") {
			rest := strings.Join(segs[3:], "/")
			if segs[2] == "cwd" {
				if k := relativeDev(rest); k != devNone {
					return k
				}
			}
			c = "/" + rest
			continue
		}
		break
	}
	return absoluteDev(c)
}

// procCwd finds /proc/PID/cwd (or a task's) in p before any cleaning and
// returns what follows it, as a path relative to an unknown directory.
func procCwd(p string) (string, bool) {
	segs := strings.Split(p, "/")
	for i := 0; i+2 < len(segs); i++ {
		if segs[i] != "proc" || segs[i+1] == "" {
			continue
		}
		j := i + 2
		if segs[j] == "task" && j+2 < len(segs) {
			j += 2
		}
		if segs[j] == "cwd" {
			rest := strings.Join(segs[j+1:], "/")
			if rest == "" {
				rest = "."
			}
			return rest, true
		}
	}
	return "", false
}

// absoluteDev classifies a clean absolute path.
func absoluteDev(c string) devKind {
	segs := strings.Split(strings.TrimPrefix(c, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "dev" && (segs[1] == "stdin" || segs[1] == "fd" && len(segs) >= 3):
		return devStdin
	case len(segs) >= 2 && segs[0] == "dev" && (segs[1] == "tcp" || segs[1] == "udp"):
		return devNetwork
	case len(segs) >= 4 && segs[0] == "proc" && segs[2] == "fd":
		return devStdin // /proc/self/fd/N, /proc/PID/fd/N, /proc/thread-self/fd/N
	case len(segs) >= 6 && segs[0] == "proc" && segs[2] == "task" && segs[4] == "fd":
		return devStdin
	}
	return devNone
}

// relativeDev classifies a clean relative path that names a descriptor
// from /dev, /proc or /proc/PID as the working directory.
func relativeDev(c string) devKind {
	segs := strings.Split(c, "/")
	switch {
	case len(segs) == 1 && segs[0] == "stdin" || len(segs) == 2 && segs[0] == "fd" && isDigits(segs[1]):
		return devStdin
	case segs[0] == "tcp" || segs[0] == "udp":
		if len(segs) >= 3 {
			return devNetwork
		}
	case len(segs) == 3 && segs[1] == "fd" && isDigits(segs[2]):
		return devStdin // self/fd/0 from /proc
	}
	return absoluteDev("/" + c)
}

// stdinAlias reports a path that names the process's own stdin (or another
// open descriptor, or a network connection): a script read from it comes
// from no file.
func stdinAlias(p string) bool {
	return devPath(p) != devNone
}

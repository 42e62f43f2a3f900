package envguard

import "golang.org/x/sys/unix"

// noLinks has the kernel walk the absolute path p, refusing symlinks: nil
// when p exists and no segment of it is a link, else why not (ENOENT for
// a missing segment, ELOOP at a link, ENOSYS without openat2). O_PATH
// opens nothing: no device, FIFO or permission on the file itself comes
// into it.
func noLinks(p string) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// isLink is an lstat of p: whether its last segment is a symlink.
func isLink(p string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return false, err
	}
	return st.Mode&unix.S_IFMT == unix.S_IFLNK, nil
}

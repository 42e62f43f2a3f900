package confine

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// privateMounts makes every mount of the run's mount namespace private:
// what the run mounts never reaches the caller's namespace.
func privateMounts() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	return nil
}

// bindReadOnly keeps path (and every mount below it) read-only in the
// run's namespace: a bind of itself onto itself, then read-only. Neither
// the entry nor anything under it can be written, removed or renamed
// (a mount point cannot be renamed; Landlock forbids unmounting).
func bindReadOnly(path string) error {
	if err := unix.Mount(path, path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", path, err)
	}
	return readOnly(path)
}

// readOnly sets a mount read-only. mount_setattr keeps the flags a user
// namespace may not clear (nosuid, nodev, ...); an old kernel's remount
// has to repeat them.
func readOnly(path string) error {
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	err := unix.MountSetattr(unix.AT_FDCWD, path, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, &attr)
	if err == nil {
		return nil
	}
	var st unix.Statfs_t
	if e := unix.Statfs(path, &st); e != nil {
		return fmt.Errorf("read-only %s: %w", path, err)
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms int64 }{{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME}} {
		if st.Flags&f.st != 0 {
			flags |= uintptr(f.ms)
		}
	}
	if e := unix.Mount("", path, "", flags, ""); e != nil {
		return fmt.Errorf("read-only %s: %w (mount_setattr: %v)", path, e, err)
	}
	return nil
}

// mask hides path: a directory behind an empty read-only tmpfs, a file
// behind an empty read-only one (/dev/null on a node without devices,
// so it reads as nothing and opens for writing fail).
func mask(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("mask %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		// A mount on a symlink lands on its target: mask what it names.
		if fi, err = os.Stat(path); err != nil {
			return nil // dangling: nothing to read
		}
	}
	if fi.IsDir() {
		if err := unix.Mount("tmpfs", path, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=000"); err != nil {
			return fmt.Errorf("mask %s: %w", path, err)
		}
		return nil
	}
	if err := unix.Mount("/dev/null", path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mask %s: %w", path, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR_NOSUID}
	if err := unix.MountSetattr(unix.AT_FDCWD, path, 0, &attr); err != nil {
		return fmt.Errorf("mask %s: %w", path, err)
	}
	return nil
}

// privateTmpfs mounts an empty tmpfs of the run's own on dir (/dev/shm:
// shared memory shared with nobody outside).
func privateTmpfs(dir string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64m,mode=1777"); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", dir, err)
	}
	return nil
}

// mountProc gives the run a /proc of its PID namespace: it sees its own
// processes, not the caller's.
func mountProc() error {
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("proc on /proc: %w", err)
	}
	return nil
}

// loopbackUp brings up lo in the run's network namespace, so servers the
// command starts for itself on 127.0.0.1 work; nothing else is reachable.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	req, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, req); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	req.SetUint16(req.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, req); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

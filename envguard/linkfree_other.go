//go:build !linux

package envguard

import (
	"errors"
	"io/fs"
	"os"
)

// noLinks has no single-walk proof here: every path is walked.
func noLinks(string) error { return errors.ErrUnsupported }

// isLink is an lstat of p: whether its last segment is a symlink.
func isLink(p string) (bool, error) {
	info, err := os.Lstat(p)
	if err != nil {
		return false, err
	}
	return info.Mode()&fs.ModeSymlink != 0, nil
}

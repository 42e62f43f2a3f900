package decisionlog

import (
	"errors"
	"fmt"
	"os"

	"gopkg.in/natefinch/lumberjack.v2"
)

// File is a decision-log file rotated by size (lumberjack) that leaves no
// part of a failed write behind: on a full disk a write may store part of
// a line, and a reader of the log must never meet half a line when writes
// succeed again.
type File struct {
	path string
	lj   *lumberjack.Logger
	max  int64
}

// NewFile writes to path, rotated at maxMB megabytes, keeping backups old
// files.
func NewFile(path string, maxMB, backups int) *File {
	if maxMB <= 0 {
		maxMB = 100 // lumberjack's default
	}
	return &File{path: path, lj: &lumberjack.Logger{Filename: path, MaxSize: maxMB, MaxBackups: backups}, max: int64(maxMB) << 20}
}

// errTooLong is a line no file of the configured size can hold: retrying
// cannot help.
var errTooLong = errors.New("longer than the decision-log file's maximum size")

// Write writes p whole or not at all.
func (f *File) Write(p []byte) (int, error) {
	if int64(len(p)) > f.max {
		return 0, permanent{fmt.Errorf("a line of %d bytes is %w", len(p), errTooLong)}
	}
	n, err := f.lj.Write(p)
	if err == nil || n == 0 {
		return n, err
	}
	// The file's last n bytes are the part written (this is the file's one
	// writer; a rotation inside Write leaves only them in the new file).
	// Take them back, and reopen, so that the next write appends at the
	// true end.
	_ = f.lj.Close()
	fi, serr := os.Stat(f.path)
	if serr == nil && fi.Size() >= int64(n) {
		serr = os.Truncate(f.path, fi.Size()-int64(n))
	}
	if serr != nil {
		return 0, fmt.Errorf("%w (and %d bytes of the line may be left in %s: %v)", err, n, f.path, serr)
	}
	return 0, err
}

// Close closes the file.
func (f *File) Close() error { return f.lj.Close() }

// permanent marks a write error that retrying cannot clear.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

func isPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

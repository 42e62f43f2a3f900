package envguard

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// gitIgnores is what .gitignore files say git leaves out of a tree (git
// add -A, git stash -u), read conservatively: a pattern it cannot judge
// (with **) ignores nothing, and below a .gitignore holding a negation (!)
// nothing is ignored at all — a name it may wrongly think ignored could be
// one git adds.
type gitIgnores struct {
	root  string
	rules map[string][]ignorePattern // by directory relative to root
	// open are the directories whose .gitignore holds a negation
	open map[string]bool
}

type ignorePattern struct {
	glob              string
	anchored, dirOnly bool
}

func newGitIgnores(root string) *gitIgnores {
	g := &gitIgnores{root: root, rules: map[string][]ignorePattern{}, open: map[string]bool{}}
	g.load(".", filepath.Join(root, ".git", "info", "exclude"))
	return g
}

// enter reads a directory's .gitignore as the walk reaches it.
func (g *gitIgnores) enter(rel string) {
	g.load(rel, filepath.Join(g.root, rel, ".gitignore"))
}

func (g *gitIgnores) load(rel, file string) {
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "!"):
			g.open[rel] = true
			continue
		case strings.Contains(line, "**") || strings.Contains(line, "\\"):
			continue
		}
		p := ignorePattern{}
		if strings.HasSuffix(line, "/") {
			p.dirOnly, line = true, strings.TrimSuffix(line, "/")
		}
		if strings.HasPrefix(line, "/") {
			p.anchored, line = true, strings.TrimPrefix(line, "/")
		}
		if strings.Contains(line, "/") {
			p.anchored = true
		}
		if line != "" {
			p.glob = line
			g.rules[rel] = append(g.rules[rel], p)
		}
	}
}

// ignored reports an entry (its path relative to root) git leaves out.
func (g *gitIgnores) ignored(rel string, dir bool) bool {
	if g == nil || rel == "." {
		return false
	}
	// the directories from the root down to the entry's parent
	parents := []string{"."}
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		parents = append(parents, d)
	}
	for _, p := range parents {
		if g.open[p] {
			return false
		}
	}
	name := path.Base(rel)
	for _, base := range parents {
		for _, p := range g.rules[base] {
			if p.dirOnly && !dir {
				continue
			}
			subject := name
			if p.anchored {
				subject = rel
				if base != "." {
					subject = strings.TrimPrefix(rel, base+"/")
				}
			}
			if ok, err := path.Match(p.glob, subject); ok && err == nil {
				return true
			}
		}
	}
	return false
}

// trackedNames lists the paths git's index holds for the repository
// holding dir (its .git found upward), relative to the repository's top:
// what git ls-files and git diff --name-only can print. Index versions 2,
// 3 and 4 are read; anything else is an error.
func trackedNames(dir string) ([]string, error) {
	top := dir
	for i := 0; i < 64; i++ {
		if fi, err := os.Stat(filepath.Join(top, ".git")); err == nil && fi.IsDir() {
			break
		}
		parent := filepath.Dir(top)
		if parent == top {
			return nil, errNoIndex
		}
		top = parent
	}
	f, err := os.Open(filepath.Join(top, ".git", "index"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxArchiveBytes))
	if err != nil || len(data) < 12 || string(data[:4]) != "DIRC" {
		return nil, errNoIndex
	}
	version := be32(data[4:])
	count := int(be32(data[8:]))
	if version < 2 || version > 4 || count > maxArchiveEntries*10 {
		return nil, errNoIndex
	}
	names := make([]string, 0, count)
	at, prev := 12, ""
	for i := 0; i < count; i++ {
		const fixed = 62 // ctime … sha-1, then 2 bytes of flags
		if at+fixed > len(data) {
			return nil, errNoIndex
		}
		flags := int(data[at+60])<<8 | int(data[at+61])
		start := at + fixed
		if flags&0x4000 != 0 { // extended flags (version 3 and up)
			start += 2
		}
		if start > len(data) {
			return nil, errNoIndex
		}
		var name string
		if version == 4 {
			// a varint of bytes to drop from the previous name, then the rest
			strip, n := 0, 0
			for {
				if start+n >= len(data) {
					return nil, errNoIndex
				}
				c := data[start+n]
				strip = strip<<7 | int(c&0x7f)
				n++
				if c&0x80 == 0 {
					break
				}
				strip++
			}
			end := bytes.IndexByte(data[start+n:], 0)
			if end < 0 || strip > len(prev) {
				return nil, errNoIndex
			}
			name = prev[:len(prev)-strip] + string(data[start+n:start+n+end])
			at = start + n + end + 1
		} else {
			end := bytes.IndexByte(data[start:], 0)
			if end < 0 {
				return nil, errNoIndex
			}
			name = string(data[start : start+end])
			// entries are padded with NULs to a multiple of 8 bytes
			entry := start + end - at + 1
			at += (entry + 7) &^ 7
		}
		names = append(names, filepath.Join(top, name))
		prev = name
	}
	return names, nil
}

var errNoIndex = errors.New("no git index read")

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

package envguard

import (
	"bufio"
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

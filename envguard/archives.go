package envguard

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Bounds on reading an archive's member names at decision time: past
// them the archive could hold any name.
const (
	maxArchiveEntries = 10000
	maxArchiveBytes   = 64 << 20
)

var errArchiveUnread = errors.New("archive not read")

// archiveWord is the archive an extracting program reads: tar's -f value
// (a cluster's f takes the next word), unzip's first operand; an
// opaque word when it reads stdin or the analysis cannot tell.
func archiveWord(canon string, args []word) word {
	unknown := word{text: "<archive>", kind: opaque}
	switch canon {
	case "tar":
		for i, w := range args {
			if w.kind != literal {
				return unknown
			}
			t := w.text
			if v, ok := strings.CutPrefix(t, "--file="); ok {
				return archiveOperand(v)
			}
			if t == "--file" && i+1 < len(args) {
				return archiveOperandWord(args[i+1])
			}
			if i == 0 && !strings.HasPrefix(t, "-") {
				t = "-" + t
			}
			if strings.HasPrefix(t, "-") && !strings.HasPrefix(t, "--") {
				if j := strings.IndexByte(t, 'f'); j > 0 {
					if j+1 < len(t) {
						return archiveOperand(t[j+1:])
					}
					if i+1 < len(args) {
						return archiveOperandWord(args[i+1])
					}
				}
			}
		}
		return unknown // no -f: $TAPE or stdin
	case "unzip":
		for _, w := range args {
			if w.kind != literal {
				return unknown
			}
			if !strings.HasPrefix(w.text, "-") {
				return archiveOperand(w.text)
			}
		}
	}
	return unknown
}

func archiveOperand(s string) word { return archiveOperandWord(word{text: s, kind: literal}) }

func archiveOperandWord(w word) word {
	if w.kind != literal || w.text == "-" || stdinAlias(w.text) {
		return word{text: "<archive>", kind: opaque}
	}
	return w
}

// archiveNames lists an archive's member names: tar (plain, gzip or
// bzip2) or zip, bounded; any other format is an error.
func archiveNames(ctx context.Context, p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, errArchiveUnread
	}
	br := bufio.NewReader(f)
	magic, _ := br.Peek(4)
	if bytes.HasPrefix(magic, []byte("PK\x03\x04")) || bytes.HasPrefix(magic, []byte("PK\x05\x06")) {
		if fi.Size() > maxArchiveBytes {
			return nil, errArchiveUnread
		}
		z, err := zip.NewReader(f, fi.Size())
		if err != nil || len(z.File) > maxArchiveEntries {
			return nil, errArchiveUnread
		}
		names := make([]string, len(z.File))
		for i, m := range z.File {
			names[i] = m.Name
		}
		return names, nil
	}
	var r io.Reader = br
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		g, err := gzip.NewReader(br)
		if err != nil {
			return nil, errArchiveUnread
		}
		r = g
	case bytes.HasPrefix(magic, []byte("BZh")):
		r = bzip2.NewReader(br)
	}
	tr := tar.NewReader(io.LimitReader(r, maxArchiveBytes))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, nil
		}
		if err != nil || len(names) >= maxArchiveEntries || ctx.Err() != nil {
			return nil, errArchiveUnread
		}
		names = append(names, h.Name)
		if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink {
			names = append(names, h.Linkname)
		}
	}
}

// archiveReaches reports an archive whose members could write a protected
// name: one of them names it, or the archive cannot be read. With no
// directory to resolve a relative archive in, it is judged by its name
// alone.
//
// An archive that does not exist, and that the command does not write
// first, extracts nothing: the program fails.
func archiveReaches(ctx context.Context, match func(string) (string, bool), w word, cwd string, list func(context.Context, string) ([]string, error), written func(word) bool) (string, bool) {
	if w.kind != literal {
		return "", true
	}
	if w.hdoc != "" {
		for _, n := range PatchFiles(w.hdoc) {
			if name, ok := match(n); ok {
				return name, true
			}
		}
		return "", false
	}
	p, ok := fromDir(cwd, w.text)
	if !ok {
		return "", false
	}
	names, err := list(ctx, p)
	if errors.Is(err, fs.ErrNotExist) && !written(w) {
		return "", false
	}
	if err != nil {
		return "", true
	}
	for _, n := range names {
		if name, ok := match(n); ok {
			return name, true
		}
	}
	return "", false
}

// patchInput is the patch a program applies: patch's -i value, its second
// operand, or its stdin redirected from a named file; git apply's and git
// am's first operand or stdin. Anything else is known only at run time.
func (a *analyzer) patchInput(ctx leafCtx, canon string, args []word) word {
	unknown := word{text: "<patch>", kind: opaque}
	var operands []word
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind != literal {
			return unknown
		}
		switch {
		case canon == "patch" && (w.text == "-i" || w.text == "--input") && i+1 < len(args):
			return archiveOperandWord(args[i+1])
		case canon == "patch" && strings.HasPrefix(w.text, "--input="):
			return archiveOperand(strings.TrimPrefix(w.text, "--input="))
		case canon == "patch" && strings.HasPrefix(w.text, "-i") && len(w.text) > 2:
			return archiveOperand(w.text[2:])
		case canon == "patch" && len(w.text) == 2 && strings.ContainsRune("BDFgoprVxYz", rune(w.text[1])) && strings.HasPrefix(w.text, "-"):
			i++ // an option with a value
		case strings.HasPrefix(w.text, "-"):
		default:
			operands = append(operands, w)
		}
	}
	if canon != "patch" && len(operands) > 0 {
		if len(operands) > 1 {
			return unknown
		}
		return archiveOperandWord(operands[0])
	}
	if canon == "patch" && len(operands) > 1 {
		return archiveOperandWord(operands[1])
	}
	if ctx.stmt != nil {
		for _, r := range ctx.stmt.Redirs {
			if r.N != nil && r.N.Value != "0" {
				continue
			}
			switch {
			case r.Op == syntax.RdrIn && !ctx.stdinPiped:
				return archiveOperandWord(wordOf(ctx.src, r.Word))
			case (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) && r.Hdoc != nil:
				// git apply <<'EOF': the patch is in the command
				if body := wordOf(ctx.src, r.Hdoc); body.kind == literal {
					return word{text: "<here-document>", kind: literal, hdoc: body.text + "\n"}
				}
			}
		}
	}
	return unknown
}

// patchOriginal is patch's first operand: the file it patches.
func patchOriginal(args []word) (word, bool) {
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind == literal && len(w.text) == 2 && strings.HasPrefix(w.text, "-") && strings.ContainsRune("BDFgiopVxYz", rune(w.text[1])) {
			i++
			continue
		}
		if w.kind != literal || !strings.HasPrefix(w.text, "-") {
			return w, true
		}
	}
	return word{}, false
}

// patchNames lists the file names a patch file names (PatchFiles),
// bounded.
func patchNames(ctx context.Context, p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxArchiveBytes+1))
	if err != nil || len(data) > maxArchiveBytes || ctx.Err() != nil {
		return nil, errArchiveUnread
	}
	names := PatchFiles(string(data))
	if len(names) > maxArchiveEntries {
		return nil, errArchiveUnread
	}
	return names, nil
}

// PatchFiles are the file names a patch names: a unified, context or git
// diff's (---, +++, ***, diff --git, rename and copy from and to) and an
// apply_patch envelope's (*** Add File:, *** Update File:, *** Delete File:,
// *** Move to:).
func PatchFiles(text string) []string {
	var names []string
	envelope := strings.Contains(text, "*** Begin Patch")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		for _, prefix := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "} {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				names = append(names, strings.TrimSpace(rest))
				line = ""
			}
		}
		if envelope || strings.HasPrefix(line, "*** ") && strings.HasSuffix(line, "****") {
			continue // the envelope's own lines; a context diff's hunk header
		}
		for _, prefix := range []string{"--- ", "+++ ", "*** ", "rename to ", "copy to ", "rename from ", "copy from "} {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				name, _, _ := strings.Cut(rest, "\t")
				names = append(names, strings.TrimSpace(name))
			}
		}
		if rest, ok := strings.CutPrefix(line, "diff --git "); ok {
			names = append(names, strings.Fields(rest)...)
		}
		if len(names) > maxArchiveEntries {
			break
		}
	}
	return names
}

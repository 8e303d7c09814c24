package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// A kind says what a release does with a module of the repository.
type kind int

const (
	// unpublished modules are never required from outside the repository:
	// a release updates their requirements but tags nothing.
	unpublished kind = iota
	// library modules are tagged, and their API is checked against their
	// last release.
	library
	// command modules are tagged, for go install ...@version. A main
	// package has no API to check.
	command
)

// kinds classifies every module of the repository by directory. A module
// that is not listed here fails [checkRequires], so that a new module is
// published, or not, by decision.
var kinds = map[string]kind{
	".":                    library,
	"otelidempotency":      library,
	"persistence/postgres": library,
	"grpcidempotency":      library,
	"cmd/retrysafe":        command,
	"examples":             unpublished,
	"examples/cdk":         unpublished,
	"examples/grpcorders":  unpublished,
	"bench/compare":        unpublished,
	"bench/wait":           unpublished,
	"scripts/release":      unpublished,
}

// repo is a git work tree holding the root module and its submodules.
type repo struct {
	dir  string // the work tree's top directory
	root string // the root module's path

	tags map[string]string // tag name -> the commit it names
}

// A mod is a module of the repository: its directory, relative and
// slash-separated ("." for the root), and its path. Go's convention for
// a module in a subdirectory ties the two: path is root + "/" + dir, and
// its tags are dir + "/vX.Y.Z".
type mod struct {
	dir  string
	path string
}

// tagPrefix is what the tags of m's versions start with.
func (m mod) tagPrefix() string {
	if m.dir == "." {
		return ""
	}
	return m.dir + "/"
}

// subdir is m's directory as git and module zips name it.
func (m mod) subdir() string {
	if m.dir == "." {
		return ""
	}
	return m.dir
}

// file is the path of f, a file of m, from the repository's top.
func (m mod) file(f string) string { return path.Join(m.subdir(), f) }

// openRepo opens the git work tree that holds dir.
func openRepo(dir string) (*repo, error) {
	top, err := git(dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	r := &repo{dir: top}
	data, err := os.ReadFile(filepath.Join(top, "go.mod"))
	if err != nil {
		return nil, err
	}
	r.root = modfile.ModulePath(data)
	if r.root == "" {
		return nil, fmt.Errorf("%s/go.mod has no module line", top)
	}
	if err := r.loadTags(); err != nil {
		return nil, err
	}
	return r, nil
}

// modFor returns the module of the repository whose path is p, if p is
// one: the root's path or a path under it.
func (r *repo) modFor(p string) (mod, bool) {
	if p == r.root {
		return mod{dir: ".", path: p}, true
	}
	if d, ok := strings.CutPrefix(p, r.root+"/"); ok {
		return mod{dir: d, path: p}, true
	}
	return mod{}, false
}

// modules returns the modules of the work tree, the root first, then by
// directory: every go.mod that git tracks or would track, outside
// testdata and the directories the go command ignores.
func (r *repo) modules() ([]mod, error) {
	out, err := git(r.dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ":(glob)**/go.mod")
	if err != nil {
		return nil, err
	}
	var mods []mod
	seen := map[string]bool{}
	for _, f := range strings.Split(out, "\x00") {
		if f == "" || seen[f] || ignoredByGo(f) {
			continue
		}
		seen[f] = true
		if _, err := os.Stat(filepath.Join(r.dir, f)); err != nil {
			continue // deleted in the work tree
		}
		data, err := os.ReadFile(filepath.Join(r.dir, f))
		if err != nil {
			return nil, err
		}
		p := modfile.ModulePath(data)
		dir := path.Dir(f)
		m, ok := r.modFor(p)
		if !ok || m.dir != dir {
			want := r.root + "/" + dir
			if dir == "." {
				want = r.root
			}
			return nil, fmt.Errorf("%s declares module %s, but the tags of a module in that directory are for %s", f, p, want)
		}
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b mod) int {
		if a.dir == "." || b.dir == "." {
			return boolCmp(b.dir == ".", a.dir == ".")
		}
		return strings.Compare(a.dir, b.dir)
	})
	return mods, nil
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// ignoredByGo reports whether the go command ignores the directory of the
// slash-separated file f: testdata, and names that start with . or _.
func ignoredByGo(f string) bool {
	for _, e := range strings.Split(path.Dir(f), "/") {
		if e == "testdata" || (e != "." && (strings.HasPrefix(e, ".") || strings.HasPrefix(e, "_"))) {
			return true
		}
	}
	return false
}

// goMod reads and parses m's go.mod: in the work tree when commit is "",
// else at commit.
func (r *repo) goMod(m mod, commit string) (*modfile.File, error) {
	var data []byte
	var err error
	name := m.file("go.mod")
	if commit == "" {
		data, err = os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(name)))
	} else {
		var s string
		s, err = gitRaw(r.dir, "show", commit+":"+name)
		data = []byte(s)
	}
	if err != nil {
		return nil, err
	}
	return modfile.Parse(name, data, nil)
}

// loadTags reads the repository's tags and the commits they name.
func (r *repo) loadTags() error {
	out, err := git(r.dir, "for-each-ref", "--format=%(refname) %(objectname) %(*objectname)", "refs/tags")
	if err != nil {
		return err
	}
	r.tags = map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		commit := f[1]
		if len(f) == 3 {
			commit = f[2] // an annotated tag: the commit it points to
		}
		r.tags[strings.TrimPrefix(f[0], "refs/tags/")] = commit
	}
	return nil
}

// versions returns the tagged versions of m, lowest first: the tags
// tagPrefix + vX.Y.Z whose commit holds m's go.mod, as the go command
// would see them.
func (r *repo) versions(m mod) []string {
	var vs []string
	for tag, commit := range r.tags {
		v, ok := strings.CutPrefix(tag, m.tagPrefix())
		if !ok || !semver.IsValid(v) || semver.Canonical(v) != v || module.Check(m.path, v) != nil {
			continue
		}
		if _, err := git(r.dir, "cat-file", "-e", commit+":"+m.file("go.mod")); err != nil {
			continue
		}
		vs = append(vs, v)
	}
	semver.Sort(vs)
	return vs
}

// latest returns the highest tagged version of m, or "".
func (r *repo) latest(m mod) string {
	vs := r.versions(m)
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// commitTime returns the committer time of commit, which the go command
// takes as the time of a version.
func (r *repo) commitTime(commit string) (time.Time, error) {
	out, err := git(r.dir, "log", "-1", "--format=%ct", commit)
	if err != nil {
		return time.Time{}, err
	}
	sec, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("commit time of %s: %v", commit, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// pseudoVersion returns the pseudo-version the go command gives commit as
// a version of m: based on the highest tag of m that is an ancestor of it.
func (r *repo) pseudoVersion(m mod, commit string) (string, error) {
	t, err := r.commitTime(commit)
	if err != nil {
		return "", err
	}
	older := ""
	for _, v := range r.versions(m) {
		if r.isAncestor(r.tags[m.tagPrefix()+v], commit) && semver.Compare(v, older) > 0 {
			older = v
		}
	}
	major := semver.Major(older)
	if major == "v1" || major == "v0" {
		major = ""
	}
	return module.PseudoVersion(major, older, t, commit[:12]), nil
}

// isAncestor reports whether commit a is an ancestor of commit b (or b).
func (r *repo) isAncestor(a, b string) bool {
	_, err := git(r.dir, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// resolve returns the commit of version v of m: a tag's, or a
// pseudo-version's when it names a commit of the repository with the
// pseudo-version the go command would give it.
func (r *repo) resolve(m mod, v string) (string, error) {
	if commit, ok := r.tags[m.tagPrefix()+v]; ok && slices.Contains(r.versions(m), v) {
		return commit, nil
	}
	if !module.IsPseudoVersion(v) {
		return "", fmt.Errorf("%s@%s: no tag %s%s in the repository", m.path, v, m.tagPrefix(), v)
	}
	rev, err := module.PseudoVersionRev(v)
	if err != nil {
		return "", err
	}
	commit, err := git(r.dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("%s@%s: the repository has no commit %s (in a shallow clone, fetch the history: git fetch --unshallow)", m.path, v, rev)
	}
	if _, err := git(r.dir, "cat-file", "-e", commit+":"+m.file("go.mod")); err != nil {
		return "", fmt.Errorf("%s@%s: commit %s has no %s", m.path, v, rev, m.file("go.mod"))
	}
	want, err := r.pseudoVersion(m, commit)
	if err != nil {
		return "", err
	}
	if want != v {
		return "", fmt.Errorf("%s@%s: the pseudo-version of commit %s is %s", m.path, v, rev, want)
	}
	return commit, nil
}

// git runs git in dir and returns its output, trimmed.
func git(dir string, args ...string) (string, error) {
	out, err := gitRaw(dir, args...)
	return strings.TrimSpace(out), err
}

// gitRaw runs git in dir and returns its output as it is.
func gitRaw(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return stdout.String(), fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return stdout.String(), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}

// goCmd runs the go command in dir with the environment and extra
// variables, and returns its combined output.
func goCmd(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("go %s (in %s): %s\n%s", strings.Join(args, " "), dir, exit, strings.TrimSpace(out.String()))
		}
	}
	return out.String(), err
}

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// release tags version v of every published module, in the order their
// requirements give: the root first, at HEAD; then, one commit for each
// further step, the modules whose requirements on the repository's
// modules are all tagged by then, once their go.mod requires those tags.
// Before it tags anything, it checks the API against the last release;
// before it tags a module whose requirements change, that it builds on its
// own (GOWORK=off) against the new tags. It pushes nothing: it prints the
// command that does. With dryRun it prints the steps and changes nothing.
func (r *repo) release(w io.Writer, v string, dryRun bool) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("%s is not a version vMAJOR.MINOR.PATCH", v)
	}
	if major := semver.Major(v); major != "v0" && major != "v1" {
		return fmt.Errorf("%s: a major version from v2 on needs new module paths (/%s), which this script does not make", v, major)
	}
	if out, err := git(r.dir, "status", "--porcelain", "--untracked-files=no"); err != nil || out != "" {
		return fmt.Errorf("the work tree has changes: commit them first\n%s%v", out, errOrNil(err))
	}
	mods, err := r.modules()
	if err != nil {
		return err
	}
	if errs := r.checkRequires(true); len(errs) > 0 {
		return errors.Join(errs...)
	}

	published := map[string]mod{}
	for _, m := range mods {
		if kinds[m.dir] == unpublished {
			continue
		}
		published[m.path] = m
		tag := m.tagPrefix() + v
		if _, ok := r.tags[tag]; ok {
			return fmt.Errorf("tag %s exists already", tag)
		}
		if last := r.latest(m); last != "" && semver.Compare(v, last) <= 0 {
			return fmt.Errorf("%s: %s is not after its last release, %s", m.path, v, last)
		}
	}

	steps, err := r.plan(mods, published)
	if err != nil {
		return err
	}
	for i, step := range steps {
		fmt.Fprintf(w, "step %d:", i+1)
		for _, m := range step {
			if _, ok := published[m.path]; ok {
				fmt.Fprintf(w, " tag %s%s", m.tagPrefix(), v)
			} else {
				fmt.Fprintf(w, " update %s", m.dir)
			}
		}
		fmt.Fprintln(w)
	}
	if dryRun {
		return nil
	}

	reports, err := r.apiCheck(w)
	if err != nil {
		return err
	}
	for _, rep := range reports {
		if len(rep.incompatible) == 0 {
			continue
		}
		if semver.Major(rep.base) != "v0" {
			return fmt.Errorf("%s: incompatible changes since %s need a new major version, with a new module path", rep.path, rep.base)
		}
		if semver.MajorMinor(v) == semver.MajorMinor(rep.base) {
			return fmt.Errorf("%s: incompatible changes since %s need a new minor version before v1, not %s", rep.path, rep.base, v)
		}
	}

	var tags []string
	for i, step := range steps {
		if i > 0 {
			if err := r.require(step, published, v, w); err != nil {
				return err
			}
			msg := fmt.Sprintf("Release %s: require %s of the repository's modules", v, v)
			if err := r.commit(step, msg, i == 1); err != nil {
				return err
			}
		}
		for _, m := range step {
			if _, ok := published[m.path]; !ok {
				continue
			}
			tag := m.tagPrefix() + v
			if _, err := git(r.dir, "tag", "-a", "-m", m.path+" "+v, tag, "HEAD"); err != nil {
				return err
			}
			tags = append(tags, tag)
			fmt.Fprintf(w, "tagged %s\n", tag)
		}
		if err := r.loadTags(); err != nil {
			return err
		}
	}
	if len(steps) == 1 {
		if err := r.commit(nil, "Release "+v+": the accepted API changes are released", true); err != nil {
			return err
		}
	}
	branch, err := git(r.dir, "rev-parse", "--abbrev-ref", "HEAD")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nNothing is pushed yet. Push the commits and the tags together:\n\n\tgit push --atomic origin %s %s\n", branch, strings.Join(tags, " "))
	return nil
}

func errOrNil(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// plan orders the modules a release changes into steps: the published
// modules that require no other published one first, then each module
// once all the published modules it requires are in earlier steps.
// Unpublished modules that require a published one are updated with the
// step they fit, and not tagged.
func (r *repo) plan(mods []mod, published map[string]mod) ([][]mod, error) {
	deps := map[string][]string{}
	var todo []mod
	for _, m := range mods {
		f, err := r.goMod(m, "")
		if err != nil {
			return nil, err
		}
		for _, req := range f.Require {
			if _, ok := published[req.Mod.Path]; ok {
				deps[m.path] = append(deps[m.path], req.Mod.Path)
			}
		}
		if _, ok := published[m.path]; ok || len(deps[m.path]) > 0 {
			todo = append(todo, m)
		}
	}
	done := map[string]bool{}
	var steps [][]mod
	for len(todo) > 0 {
		var step, rest []mod
		for _, m := range todo {
			if !slices.ContainsFunc(deps[m.path], func(d string) bool { return !done[d] }) {
				step = append(step, m)
			} else {
				rest = append(rest, m)
			}
		}
		if len(step) == 0 {
			return nil, fmt.Errorf("the requirements between these modules form a cycle: %v", rest)
		}
		for _, m := range step {
			done[m.path] = true
		}
		steps = append(steps, step)
		todo = rest
	}
	return steps, nil
}

// require makes each module of step require version v of the published
// modules it requires and tidies it on its own; and it builds each
// published one on its own against those versions, from the repository's
// tags, as its users will. (The tests ran in the workspace, on the same
// code: make test, before the release.)
func (r *repo) require(step []mod, published map[string]mod, v string, w io.Writer) error {
	for _, m := range step {
		f, err := r.goMod(m, "")
		if err != nil {
			return err
		}
		args := []string{"mod", "edit"}
		for _, req := range f.Require {
			if _, ok := published[req.Mod.Path]; ok {
				args = append(args, "-require="+req.Mod.Path+"@"+v)
			}
		}
		if _, err := goCmd(filepath.Join(r.dir, m.subdir()), []string{"GOWORK=off"}, args...); err != nil {
			return err
		}
	}
	if err := r.tidy(w, false, step); err != nil {
		return err
	}
	proxy, err := r.seed()
	defer os.RemoveAll(proxy)
	if err != nil {
		return err
	}
	env, err := r.localEnv(proxy)
	if err != nil {
		return err
	}
	for _, m := range step {
		if _, ok := published[m.path]; !ok {
			continue // built in the workspace only
		}
		fmt.Fprintf(w, "%s: builds on its own, requiring %s\n", m.path, v)
		if _, err := goCmd(filepath.Join(r.dir, m.subdir()), env, "build", "./..."); err != nil {
			return err
		}
	}
	return nil
}

// commit commits the go.mod and go.sum files of mods, and, with
// clearAccepted, an emptied acceptedFile: the changes it lists are
// released.
func (r *repo) commit(mods []mod, msg string, clearAccepted bool) error {
	var files []string
	for _, m := range mods {
		files = append(files, m.file("go.mod"))
		if exists(filepath.Join(r.dir, filepath.FromSlash(m.file("go.sum")))) {
			files = append(files, m.file("go.sum"))
		}
	}
	if clearAccepted {
		acc, err := r.accepted()
		if err != nil {
			return err
		}
		if len(acc) > 0 {
			if err := os.WriteFile(filepath.Join(r.dir, filepath.FromSlash(acceptedFile)), []byte(acceptedHeader), 0o644); err != nil {
				return err
			}
			files = append(files, acceptedFile)
		}
	}
	if len(files) == 0 {
		return nil
	}
	if _, err := git(r.dir, append([]string{"add", "--"}, files...)...); err != nil {
		return err
	}
	if _, err := git(r.dir, "diff", "--cached", "--quiet"); err == nil {
		return nil // nothing changed
	}
	_, err := git(r.dir, "commit", "-q", "-m", msg)
	return err
}

// acceptedHeader is what acceptedFile holds when nothing is accepted.
const acceptedHeader = `# Incompatible API changes since the last release, accepted on purpose:
# one a line, as make apicheck prints them. A release empties this file.
`

// requireCommit makes every module that requires a module of the
// repository require the pseudo-version of commit rev instead, and
// tidies them: how a module comes to need a change of another between
// releases.
func (r *repo) requireCommit(w io.Writer, rev string) error {
	commit, err := git(r.dir, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return err
	}
	mods, err := r.modules()
	if err != nil {
		return err
	}
	var changed []mod
	for _, m := range mods {
		f, err := r.goMod(m, "")
		if err != nil {
			return err
		}
		args := []string{"mod", "edit"}
		for _, req := range f.Require {
			dep, ok := r.modFor(req.Mod.Path)
			if !ok {
				continue
			}
			pv, err := r.pseudoVersion(dep, commit)
			if err != nil {
				return err
			}
			if err := module.Check(dep.path, pv); err != nil {
				return err
			}
			args = append(args, "-require="+dep.path+"@"+pv)
			fmt.Fprintf(w, "%s: require %s %s\n", m.file("go.mod"), dep.path, pv)
		}
		if len(args) == 2 {
			continue
		}
		if _, err := goCmd(filepath.Join(r.dir, m.subdir()), []string{"GOWORK=off"}, args...); err != nil {
			return err
		}
		changed = append(changed, m)
	}
	return r.tidy(w, false, changed)
}

// tidy runs go mod tidy in each of mods on its own (GOWORK=off), with the
// versions of the repository's modules they require served from its
// history. With check, it changes nothing, and fails when a go.mod or
// go.sum is not tidy.
func (r *repo) tidy(w io.Writer, check bool, mods []mod) error {
	proxy, err := r.seed()
	defer os.RemoveAll(proxy)
	if err != nil {
		return err
	}
	env, err := r.localEnv(proxy)
	if err != nil {
		return err
	}
	env = append(env, "GOFLAGS="+goflagsWithout("-mod="))
	var errs []error
	for _, m := range mods {
		args := []string{"mod", "tidy"}
		if check {
			args = append(args, "-diff")
		}
		if _, err := goCmd(filepath.Join(r.dir, m.subdir()), env, args...); err != nil {
			errs = append(errs, fmt.Errorf("%s is not tidy on its own (GOWORK=off; make tidy tidies it): %w", m.file("go.mod"), err))
			continue
		}
		if !check {
			fmt.Fprintf(w, "%s: tidy\n", m.file("go.mod"))
		}
	}
	return errors.Join(errs...)
}

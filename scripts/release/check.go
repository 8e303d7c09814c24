package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// checkRequires checks the go.mod files of the work tree, and returns
// one error per problem:
//
//   - every module is classified in [kinds], and go.work holds every module
//     that requires another of the repository's;
//   - no go.mod replaces a module: a consumer's build ignores replace, and
//     go install ...@version refuses a module that has one;
//   - each requirement on a module of the repository names a version that
//     has its tag in the repository; with dev, a pseudo-version of a commit
//     of HEAD's history will do as well (the requirement of a module on an
//     unreleased version of another, between releases).
func (r *repo) checkRequires(dev bool) []error {
	mods, err := r.modules()
	if err != nil {
		return []error{err}
	}
	var errs []error
	work, err := r.workspace()
	if err != nil {
		errs = append(errs, err)
	}
	head, err := git(r.dir, "rev-parse", "HEAD")
	if err != nil {
		return append(errs, err)
	}
	for _, m := range mods {
		if _, ok := kinds[m.dir]; !ok {
			errs = append(errs, fmt.Errorf("%s: a module that scripts/release does not know: add it to kinds, published (library, command) or not", m.file("go.mod")))
		}
		f, err := r.goMod(m, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, rep := range f.Replace {
			errs = append(errs, fmt.Errorf("%s: replace %s: a consumer's build ignores it, and go install ...@version refuses it; require a version instead, and use go.work to build against the work tree",
				m.file("go.mod"), rep.Old.Path))
		}
		inRepo := false
		for _, req := range f.Require {
			dep, ok := r.modFor(req.Mod.Path)
			if !ok {
				continue
			}
			inRepo = true
			v := req.Mod.Version
			if _, ok := r.tags[dep.tagPrefix()+v]; ok && slices.Contains(r.versions(dep), v) {
				continue
			}
			if !module.IsPseudoVersion(v) {
				errs = append(errs, fmt.Errorf("%s requires %s %s, which is not released: the repository has no tag %s%s", m.file("go.mod"), dep.path, v, dep.tagPrefix(), v))
				continue
			}
			if !dev {
				errs = append(errs, fmt.Errorf("%s requires %s %s, a pseudo-version, which is not released: require a tagged version (RELEASING.md)", m.file("go.mod"), dep.path, v))
				continue
			}
			commit, err := r.resolve(dep, v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s requires %w", m.file("go.mod"), err))
				continue
			}
			if !r.isAncestor(commit, head) {
				errs = append(errs, fmt.Errorf("%s requires %s %s, of commit %s, which is not in HEAD's history", m.file("go.mod"), dep.path, v, commit[:12]))
			}
		}
		if inRepo && work != nil && !slices.Contains(work, m.dir) {
			errs = append(errs, fmt.Errorf("%s requires a module of the repository, but go.work does not use %s: its tests would build against the required version, not the work tree", m.file("go.mod"), m.dir))
		}
	}
	return errs
}

// workspace returns the directories that go.work uses, cleaned and
// slash-separated.
func (r *repo) workspace() ([]string, error) {
	name := filepath.Join(r.dir, "go.work")
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("the repository has no go.work")
	}
	if err != nil {
		return nil, err
	}
	w, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, u := range w.Use {
		d := filepath.ToSlash(filepath.Clean(u.Path))
		dirs = append(dirs, strings.TrimPrefix(d, "./"))
	}
	return dirs, nil
}

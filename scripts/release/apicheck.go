package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/module"
)

// apidiff is the API comparison tool, at a pinned version. Its -m mode
// compares every non-internal package of two versions of a module.
const apidiff = "golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4"

// acceptedFile lists the incompatible API changes made since the last
// release on purpose, one a line, as the API check prints them. A
// release empties it.
const acceptedFile = "scripts/release/accepted-breaks.txt"

// An apiReport is the API of a library module compared with its last
// release.
type apiReport struct {
	mod
	base         string   // the last release, "" if none
	incompatible []string // "module path: change", as apidiff words it
	compatible   []string
	unaccepted   []string // the incompatible changes acceptedFile does not list
}

// apiCheck compares the API of each library module in the work tree with
// its last release: the work tree's root on its own (GOWORK=off), the
// other modules in the workspace, since their next release requires the
// root as it is. It writes what it finds to w, and fails when an
// incompatible change is not in acceptedFile.
func (r *repo) apiCheck(w io.Writer) ([]apiReport, error) {
	mods, err := r.modules()
	if err != nil {
		return nil, err
	}
	var reports []apiReport
	var bases []module.Version
	for _, m := range mods {
		if kinds[m.dir] != library {
			continue
		}
		rep := apiReport{mod: m, base: r.latest(m)}
		if rep.base == "" {
			fmt.Fprintf(w, "%s: no release yet, nothing to compare\n", m.path)
		} else {
			bases = append(bases, module.Version{Path: m.path, Version: rep.base})
		}
		reports = append(reports, rep)
	}
	if len(bases) == 0 {
		return reports, nil
	}
	accepted, err := r.accepted()
	if err != nil {
		return nil, err
	}

	tmp, err := os.MkdirTemp("", "apicheck-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bin")
	if _, err := goCmd(tmp, []string{"GOBIN=" + bin, "GOWORK=off", "GOFLAGS=" + goflagsWithout("-mod=")}, "install", apidiff); err != nil {
		return nil, err
	}
	proxy := filepath.Join(tmp, "proxy")
	vs, err := r.closure(bases)
	if err != nil {
		return nil, err
	}
	if err := r.writeProxy(proxy, vs); err != nil {
		return nil, err
	}
	local, err := r.localEnv(proxy)
	if err != nil {
		return nil, err
	}
	seeded, err := r.seed()
	os.RemoveAll(seeded)
	if err != nil {
		return nil, err
	}

	var unaccepted int
	for i := range reports {
		rep := &reports[i]
		if rep.base == "" {
			continue
		}
		// The last release's API, as its users build it: the module on
		// its own, with the versions it requires.
		old := filepath.Join(tmp, fmt.Sprintf("old%d", i))
		if err := r.extract(r.tags[rep.tagPrefix()+rep.base], old); err != nil {
			return nil, err
		}
		export := filepath.Join(tmp, fmt.Sprintf("old%d.x", i))
		if _, err := run(filepath.Join(old, rep.subdir()), local, filepath.Join(bin, "apidiff"), "-m", "-w", export, rep.path); err != nil {
			return nil, fmt.Errorf("%s@%s: %v", rep.path, rep.base, err)
		}
		// The work tree's.
		env := []string{"GOWORK=" + filepath.Join(r.dir, "go.work")}
		if rep.dir == "." {
			env = []string{"GOWORK=off"}
		}
		out, err := run(filepath.Join(r.dir, rep.subdir()), env, filepath.Join(bin, "apidiff"), "-m", export, rep.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", rep.path, err)
		}
		rep.incompatible, rep.compatible = parseAPIDiff(rep.path, out)
		for _, c := range rep.incompatible {
			if !accepted[c] {
				rep.unaccepted = append(rep.unaccepted, c)
			}
		}
		unaccepted += len(rep.unaccepted)
		switch {
		case len(rep.incompatible) == 0 && len(rep.compatible) == 0:
			fmt.Fprintf(w, "%s: the same API as %s\n", rep.path, rep.base)
		case len(rep.incompatible) == 0:
			fmt.Fprintf(w, "%s: compatible with %s, with additions:\n", rep.path, rep.base)
		default:
			fmt.Fprintf(w, "%s: INCOMPATIBLE with %s:\n", rep.path, rep.base)
		}
		for _, c := range rep.incompatible {
			mark := "accepted"
			if !accepted[c] {
				mark = "NOT ACCEPTED"
			}
			fmt.Fprintf(w, "  - %s (%s)\n", strings.TrimPrefix(c, rep.path+": "), mark)
		}
		for _, c := range rep.compatible {
			fmt.Fprintf(w, "  + %s\n", strings.TrimPrefix(c, rep.path+": "))
		}
	}
	if unaccepted > 0 {
		fmt.Fprintf(w, "\n%d incompatible API change(s) since the last release were not decided. Undo them, or accept each\n", unaccepted)
		fmt.Fprintf(w, "by adding its line to %s (the next release is then a new minor version before v1):\n", acceptedFile)
		for _, rep := range reports {
			for _, c := range rep.unaccepted {
				fmt.Fprintf(w, "%s\n", c)
			}
		}
		return reports, fmt.Errorf("incompatible API changes")
	}
	return reports, nil
}

// parseAPIDiff splits apidiff's report into its incompatible and
// compatible changes, each prefixed with the module's path.
func parseAPIDiff(path, out string) (incompatible, compatible []string) {
	var section *[]string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "Incompatible changes:":
			section = &incompatible
		case line == "Compatible changes:":
			section = &compatible
		case strings.HasPrefix(line, "- ") && section != nil:
			*section = append(*section, path+": "+strings.TrimPrefix(line, "- "))
		}
	}
	return incompatible, compatible
}

// accepted reads acceptedFile.
func (r *repo) accepted() (map[string]bool, error) {
	data, err := os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(acceptedFile)))
	if os.IsNotExist(err) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	acc := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			acc[line] = true
		}
	}
	return acc, nil
}

// extract writes the files of commit into dir.
func (r *repo) extract(commit, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tar := dir + ".tar"
	defer os.Remove(tar)
	if _, err := git(r.dir, "archive", "--format=tar", "-o", tar, commit); err != nil {
		return err
	}
	_, err := run(dir, nil, "tar", "-xf", tar)
	return err
}

// run runs a program in dir with the environment and extra variables,
// and returns its standard output; its standard error goes into the
// error when it fails.
func run(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// goflagsWithout returns GOFLAGS without the flags that start with
// prefix.
func goflagsWithout(prefix string) string {
	fields := strings.Fields(os.Getenv("GOFLAGS"))
	fields = slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, prefix) })
	return strings.Join(fields, " ")
}

package main

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// A version is a version of a module of the repository, and its commit.
type version struct {
	mod
	v      string
	commit string
}

func (v version) String() string { return v.path + "@" + v.v }

// required returns the requirements of the work tree's modules on modules
// of the repository.
func (r *repo) required() ([]module.Version, error) {
	mods, err := r.modules()
	if err != nil {
		return nil, err
	}
	var reqs []module.Version
	for _, m := range mods {
		f, err := r.goMod(m, "")
		if err != nil {
			return nil, err
		}
		for _, req := range f.Require {
			if _, ok := r.modFor(req.Mod.Path); ok {
				reqs = append(reqs, req.Mod)
			}
		}
	}
	return reqs, nil
}

// closure returns the versions of start and those of the repository's
// modules that they require, directly or not: what the go command reads
// to build against start.
func (r *repo) closure(start []module.Version) ([]version, error) {
	var out []version
	seen := map[module.Version]bool{}
	queue := slices.Clone(start)
	for len(queue) > 0 {
		mv := queue[0]
		queue = queue[1:]
		if seen[mv] {
			continue
		}
		seen[mv] = true
		m, ok := r.modFor(mv.Path)
		if !ok {
			return nil, fmt.Errorf("%s is not a module of this repository", mv.Path)
		}
		commit, err := r.resolve(m, mv.Version)
		if err != nil {
			return nil, err
		}
		out = append(out, version{m, mv.Version, commit})
		f, err := r.goMod(m, commit)
		if err != nil {
			return nil, err
		}
		for _, req := range f.Require {
			if _, ok := r.modFor(req.Mod.Path); ok {
				queue = append(queue, req.Mod)
			}
		}
	}
	return out, nil
}

// writeProxy writes the versions vs into dir laid out as a module proxy
// that GOPROXY=file://dir serves: for each module, @v/list (its tagged
// versions among vs), and the .info, .mod and .zip of each version, the
// zip made by golang.org/x/mod/zip from the commit, as the go command
// makes it from a repository.
func (r *repo) writeProxy(dir string, vs []version) error {
	lists := map[string][]string{}
	for _, v := range vs {
		esc, err := module.EscapePath(v.path)
		if err != nil {
			return err
		}
		ev, err := module.EscapeVersion(v.v)
		if err != nil {
			return err
		}
		at := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(at, 0o755); err != nil {
			return err
		}
		if !module.IsPseudoVersion(v.v) {
			lists[at] = append(lists[at], v.v)
		}
		t, err := r.commitTime(v.commit)
		if err != nil {
			return err
		}
		info, err := json.Marshal(struct {
			Version string
			Time    string
		}{v.v, t.Format(time.RFC3339)})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(at, ev+".info"), info, 0o644); err != nil {
			return err
		}
		gomod, err := gitRaw(r.dir, "show", v.commit+":"+v.file("go.mod"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(at, ev+".mod"), []byte(gomod), 0o644); err != nil {
			return err
		}
		z, err := os.Create(filepath.Join(at, ev+".zip"))
		if err != nil {
			return err
		}
		err = r.createZip(z, v)
		if cerr := z.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %v", v, err)
		}
	}
	for at, list := range lists {
		if err := os.WriteFile(filepath.Join(at, "list"), []byte(strings.Join(list, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// createZip writes the module zip of v: the files of its directory at
// its commit, as git archive gives them, less what a module zip leaves
// out (nested modules, vendor directories). It is
// golang.org/x/mod/zip.CreateFromVCS, which takes a work tree whose .git
// is a directory, where this one may be a linked work tree.
// TestVersionsAreTheGoCommands checks its zips against the go command's.
func (r *repo) createZip(w io.Writer, v version) error {
	args := []string{"-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", v.commit}
	if v.subdir() != "" {
		args = append(args, v.subdir())
	}
	out, err := gitRaw(r.dir, args...)
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(strings.NewReader(out), int64(len(out)))
	if err != nil {
		return err
	}
	var files []modzip.File
	haveLicense := false
	for _, zf := range zr.File {
		name, ok := strings.CutPrefix(zf.Name, v.subdir())
		if !ok || strings.HasSuffix(zf.Name, "/") {
			continue
		}
		name = strings.TrimPrefix(name, "/")
		if name == "" {
			continue
		}
		files = append(files, zipFile{name, zf})
		haveLicense = haveLicense || name == "LICENSE"
	}
	if !haveLicense && v.subdir() != "" {
		// The go command gives a module in a subdirectory the LICENSE of
		// the repository's top when it has none.
		if license, err := gitRaw(r.dir, "cat-file", "blob", v.commit+":LICENSE"); err == nil {
			files = append(files, dataFile{"LICENSE", []byte(license)})
		}
	}
	return modzip.Create(w, module.Version{Path: v.path, Version: v.v}, files)
}

// zipFile is a file of git archive's zip, as a file of a module zip.
type zipFile struct {
	name string
	f    *zip.File
}

func (f zipFile) Path() string                 { return f.name }
func (f zipFile) Lstat() (os.FileInfo, error)  { return f.f.FileInfo(), nil }
func (f zipFile) Open() (io.ReadCloser, error) { return f.f.Open() }

// dataFile is a file of a module zip from memory.
type dataFile struct {
	name string
	data []byte
}

func (f dataFile) Path() string                { return f.name }
func (f dataFile) Lstat() (os.FileInfo, error) { return dataFileInfo(f), nil }
func (f dataFile) Open() (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(f.data))), nil
}

type dataFileInfo dataFile

func (fi dataFileInfo) Name() string       { return path.Base(fi.name) }
func (fi dataFileInfo) Size() int64        { return int64(len(fi.data)) }
func (fi dataFileInfo) Mode() os.FileMode  { return 0o644 }
func (fi dataFileInfo) ModTime() time.Time { return time.Time{} }
func (fi dataFileInfo) IsDir() bool        { return false }
func (fi dataFileInfo) Sys() any           { return nil }

// localEnv is the environment of a go command that must see the versions
// of this repository's modules that the file proxy dir holds, in front
// of the configured proxies, ignoring the workspace: the checksum
// database knows no version that is not published.
func (r *repo) localEnv(dir string) ([]string, error) {
	proxy, err := goEnvVar("GOPROXY")
	if err != nil {
		return nil, err
	}
	nosumdb := r.root
	if v := os.Getenv("GONOSUMDB"); v != "" {
		nosumdb = v + "," + r.root
	}
	return []string{
		"GOWORK=off",
		"GOPROXY=" + fileURL(dir) + "," + proxy,
		"GONOSUMDB=" + nosumdb,
	}, nil
}

// fileURL is the GOPROXY entry of the file proxy in dir.
func fileURL(dir string) string {
	return "file://" + filepath.ToSlash(dir)
}

// goEnvVar returns the go command's setting of name.
func goEnvVar(name string) (string, error) {
	out, err := goCmd(".", nil, "env", name)
	return strings.TrimSpace(out), err
}

// seed puts the versions of the repository's modules that the work tree's
// go.mod files require, and those they require, into the module cache,
// from the repository's history: the go command reads a required
// version's go.mod even when the workspace holds the module, and no proxy
// has a version before it is pushed. It returns the file proxy it made of
// the versions the module cache lacked, which the caller removes.
func (r *repo) seed() (string, error) {
	reqs, err := r.required()
	if err != nil {
		return "", err
	}
	vs, err := r.closure(reqs)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "release-proxy-")
	if err != nil {
		return "", err
	}
	cache, err := goEnvVar("GOMODCACHE")
	if err != nil {
		return dir, err
	}
	var missing []version
	var args []string
	for _, v := range vs {
		esc, _ := module.EscapePath(v.path)
		ev, _ := module.EscapeVersion(v.v)
		at := filepath.Join(cache, "cache", "download", filepath.FromSlash(esc), "@v", ev)
		if !exists(at+".mod") || !exists(at+".zip") {
			missing = append(missing, v)
			args = append(args, v.String())
		}
	}
	if err := r.writeProxy(dir, missing); err != nil {
		return dir, err
	}
	if len(missing) == 0 {
		return dir, nil
	}
	env, err := r.localEnv(dir)
	if err != nil {
		return dir, err
	}
	_, err = goCmd(dir, env, append([]string{"mod", "download"}, args...)...)
	return dir, err
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

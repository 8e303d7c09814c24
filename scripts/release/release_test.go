package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// gitIdentity makes git commit and tag in a test as nobody in particular,
// whatever the machine's configuration says (signing, hooks).
func gitIdentity(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_AUTHOR_NAME", "release test")
	t.Setenv("GIT_AUTHOR_EMAIL", "release-test@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "release test")
	t.Setenv("GIT_COMMITTER_EMAIL", "release-test@example.com")
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := git(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// smallRepo makes a repository of two modules, example.com/r and
// example.com/r/sub, which requires the root at require, with one commit
// at a fixed time; it returns the repository and that commit.
func smallRepo(t *testing.T, require string) (*repo, string) {
	t.Helper()
	gitIdentity(t)
	dir := t.TempDir()
	mustGit(t, dir, "init", "-q", "-b", "main")
	writeFiles(t, dir, map[string]string{
		"go.mod":     "module example.com/r\n\ngo 1.25.0\n",
		"r.go":       "package r\n\nfunc F() {}\n",
		"sub/go.mod": "module example.com/r/sub\n\ngo 1.25.0\n\nrequire example.com/r " + require + "\n",
		"sub/sub.go": "package sub\n\nimport \"example.com/r\"\n\nfunc G() { r.F() }\n",
		"go.work":    "go 1.25.0\n\nuse (\n\t.\n\t./sub\n)\n",
	})
	mustGit(t, dir, "add", "-A")
	t.Setenv("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
	mustGit(t, dir, "commit", "-q", "-m", "first")
	commit := mustGit(t, dir, "rev-parse", "HEAD")
	r, err := openRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r, commit
}

func withKinds(t *testing.T, k map[string]kind) {
	saved := kinds
	kinds = k
	t.Cleanup(func() { kinds = saved })
}

func TestPseudoVersionIsGos(t *testing.T) {
	r, commit := smallRepo(t, "v0.0.0")
	root := mod{dir: ".", path: "example.com/r"}
	pv, err := r.pseudoVersion(root, commit)
	if err != nil {
		t.Fatal(err)
	}
	if want := "v0.0.0-20260102030405-" + commit[:12]; pv != want {
		t.Errorf("pseudo-version without a tag: %s, want %s", pv, want)
	}
	// After a tag, the next commit's pseudo-version is based on it.
	mustGit(t, r.dir, "tag", "v0.3.1", commit)
	t.Setenv("GIT_COMMITTER_DATE", "2026-01-03T00:00:00Z")
	mustGit(t, r.dir, "commit", "-q", "--allow-empty", "-m", "second")
	next := mustGit(t, r.dir, "rev-parse", "HEAD")
	if err := r.loadTags(); err != nil {
		t.Fatal(err)
	}
	pv, err = r.pseudoVersion(root, next)
	if err != nil {
		t.Fatal(err)
	}
	if want := "v0.3.2-0.20260103000000-" + next[:12]; pv != want {
		t.Errorf("pseudo-version after v0.3.1: %s, want %s", pv, want)
	}
}

func TestCheckRequires(t *testing.T) {
	withKinds(t, map[string]kind{".": library, "sub": library})
	r, commit := smallRepo(t, "v0.0.0")
	pv := "v0.0.0-20260102030405-" + commit[:12]
	sub := filepath.Join(r.dir, "sub")
	setRequire := func(v string) {
		t.Helper()
		if _, err := goCmd(sub, []string{"GOWORK=off"}, "mod", "edit", "-require=example.com/r@"+v); err != nil {
			t.Fatal(err)
		}
	}
	wantErr := func(dev bool, want string) {
		t.Helper()
		errs := r.checkRequires(dev)
		if want == "" {
			if len(errs) > 0 {
				t.Errorf("check (dev %v): %v", dev, errs)
			}
			return
		}
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("check (dev %v): %v, want one error with %q", dev, errs, want)
		}
	}

	wantErr(false, "the repository has no tag v0.0.0")

	setRequire(pv)
	wantErr(false, "a pseudo-version, which is not released")
	wantErr(true, "")

	setRequire("v0.0.0-20260102030405-0123456789ab")
	wantErr(true, "the repository has no commit 0123456789ab")

	setRequire("v0.0.0-20991231000000-" + commit[:12])
	wantErr(true, "the pseudo-version of commit "+commit[:12]+" is "+pv)

	mustGit(t, r.dir, "tag", "v0.1.0", commit)
	if err := r.loadTags(); err != nil {
		t.Fatal(err)
	}
	setRequire("v0.1.0")
	wantErr(false, "")
	setRequire("v0.1.1")
	wantErr(false, "has no tag v0.1.1")

	setRequire("v0.1.0")
	if _, err := goCmd(sub, []string{"GOWORK=off"}, "mod", "edit", "-replace=example.com/r=../"); err != nil {
		t.Fatal(err)
	}
	wantErr(true, "replace example.com/r")
}

func TestCheckRequiresKnowsEveryModule(t *testing.T) {
	withKinds(t, map[string]kind{".": library})
	r, commit := smallRepo(t, "v0.0.0")
	if _, err := goCmd(filepath.Join(r.dir, "sub"), []string{"GOWORK=off"}, "mod", "edit", "-require=example.com/r@v0.0.0-20260102030405-"+commit[:12]); err != nil {
		t.Fatal(err)
	}
	errs := r.checkRequires(true)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "sub/go.mod: a module that scripts/release does not know") {
		t.Errorf("check: %v, want an unknown module", errs)
	}
}

func TestAPICheckBeforeTheFirstRelease(t *testing.T) {
	withKinds(t, map[string]kind{".": library, "sub": library})
	r, _ := smallRepo(t, "v0.0.0")
	var out bytes.Buffer
	if _, err := r.apiCheck(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"example.com/r: no release yet, nothing to compare", "example.com/r/sub: no release yet, nothing to compare"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("apicheck says\n%s\nwant %q", &out, want)
		}
	}
}

func TestPlanTagsTheRootFirst(t *testing.T) {
	r := &repo{dir: "../..", root: "github.com/retrysafe/retrysafe"}
	mods, err := r.modules()
	if err != nil {
		t.Fatal(err)
	}
	published := map[string]mod{}
	for _, m := range mods {
		if kinds[m.dir] != unpublished {
			published[m.path] = m
		}
	}
	steps, err := r.plan(mods, published)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 2 || len(steps[0]) != 1 || steps[0][0].dir != "." {
		t.Fatalf("steps %v: want the root alone first", steps)
	}
	// Every module comes in a later step than each module it requires.
	step := map[string]int{}
	for i, s := range steps {
		for _, m := range s {
			step[m.path] = i
		}
	}
	for _, s := range steps {
		for _, m := range s {
			f, err := r.goMod(m, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, req := range f.Require {
				if i, ok := step[req.Mod.Path]; ok && i >= step[m.path] {
					t.Errorf("steps %v: %s comes in step %d, not after %s in step %d", steps, m.dir, step[m.path], req.Mod.Path, i)
				}
			}
		}
	}
	for _, dir := range []string{"otelidempotency", "cmd/retrysafe", "persistence/postgres", "grpcidempotency"} {
		if !slices.ContainsFunc(slices.Concat(steps[1:]...), func(m mod) bool { return m.dir == dir }) {
			t.Errorf("steps %v: want %s after the root", steps, dir)
		}
	}
}

// TestReleaseIsInstallable releases a temporary clone of the work tree
// with the release procedure, then builds a consumer module outside it
// against a file-based module proxy of the clone's tags, with no network
// for this repository's modules: it requires the library, otelidempotency,
// the PostgreSQL store and grpcidempotency, and installs
// cmd/retrysafe@version. Then it
// changes an exported signature, and the API check must fail until the
// change is accepted.
func TestReleaseIsInstallable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every module of a released copy of the repository")
	}
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: %v", tool, err)
		}
	}
	gitIdentity(t)
	start := time.Now()
	step := func(what string) { t.Logf("%s: %s", time.Since(start).Round(time.Second), what) }
	src, err := git(".", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatal(err)
	}
	realCache, err := goEnvVar("GOMODCACHE")
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := goEnvVar("GOPROXY")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	// The versions made here must not reach the machine's module cache, where
	// a later real release of the same version would meet them: a module
	// cache of its own, whose third-party modules come from the machine's
	// (verified when it fetched them), else from the configured proxies.
	// -trimpath lets the build cache serve packages from either cache.
	t.Setenv("GOMODCACHE", filepath.Join(tmp, "modcache"))
	t.Setenv("GOPROXY", fileURL(filepath.Join(realCache, "cache", "download"))+","+proxy)
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOFLAGS", "-modcacherw -trimpath")
	t.Setenv("GOWORK", "")

	clone := filepath.Join(tmp, "repo")
	cloneWorkTree(t, src, clone)
	r, err := openRepo(clone)
	if err != nil {
		t.Fatal(err)
	}
	rootMod, _ := r.modFor(r.root)
	v := "v0.1.0"
	if last := r.latest(rootMod); last != "" {
		v = bumpMinor(t, last)
	}

	var out bytes.Buffer
	if r.latest(rootMod) == "" {
		if _, err := r.apiCheck(&out); err != nil || !strings.Contains(out.String(), r.root+": no release yet, nothing to compare") {
			t.Errorf("apicheck before the first release: %v\n%s", err, &out)
		}
	}

	step("cloned")
	// The release: the root's tag first, then the modules that require it.
	out.Reset()
	if err := r.release(&out, v, false); err != nil {
		t.Fatalf("release %s: %v\n%s", v, err, &out)
	}
	t.Logf("release %s:\n%s", v, &out)
	step("released")
	rootTag := r.tags[v]
	for _, dir := range []string{"otelidempotency", "persistence/postgres", "grpcidempotency", "cmd/retrysafe"} {
		tag := dir + "/" + v
		commit, ok := r.tags[tag]
		if !ok {
			t.Fatalf("no tag %s", tag)
		}
		if commit == rootTag || !r.isAncestor(rootTag, commit) {
			t.Errorf("tag %s (%s) does not come after %s (%s)", tag, commit, v, rootTag)
		}
		f, err := r.goMod(mod{dir: dir, path: r.root + "/" + dir}, commit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(f.Require, func(req *modfile.Require) bool {
			return req.Mod.Path == r.root && req.Mod.Version == v
		}) {
			t.Errorf("%s/go.mod at %s does not require %s %s", dir, tag, r.root, v)
		}
	}
	if errs := r.checkRequires(false); len(errs) > 0 {
		t.Errorf("check after the release: %v", errs)
	}
	// A requirement on a version that has no tag fails the check.
	otel := filepath.Join(clone, "otelidempotency")
	if _, err := goCmd(otel, []string{"GOWORK=off"}, "mod", "edit", "-require="+r.root+"@"+bumpMinor(t, v)); err != nil {
		t.Fatal(err)
	}
	if errs := r.checkRequires(false); len(errs) != 1 || !strings.Contains(errs[0].Error(), "which is not released: the repository has no tag "+bumpMinor(t, v)) {
		t.Errorf("check with an unreleased requirement: %v", errs)
	}
	mustGit(t, clone, "checkout", "-q", "--", "otelidempotency/go.mod")

	step("checked")
	// A consumer, outside the repository, from a file proxy of its tags.
	proxyDir := filepath.Join(tmp, "proxy")
	if err := r.proxy(proxyDir); err != nil {
		t.Fatal(err)
	}
	local, err := r.localEnv(proxyDir)
	if err != nil {
		t.Fatal(err)
	}
	consumer := filepath.Join(tmp, "consumer")
	writeConsumer(t, r, consumer, v)
	env := append(local, "GOFLAGS=-mod=mod -modcacherw -trimpath")
	if out, err := goCmd(consumer, env, "build", "-o", "consumer", "."); err != nil {
		t.Fatalf("the consumer does not build: %v\n%s", err, out)
	}
	got, err := run(consumer, nil, filepath.Join(consumer, "consumer"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range []string{r.root, r.root + "/otelidempotency", r.root + "/persistence/postgres", r.root + "/grpcidempotency"} {
		if !strings.Contains(got, dep+" "+v+"\n") {
			t.Errorf("the consumer's build info lacks %s %s:\n%s", dep, v, got)
		}
	}
	step("consumer built")
	bin := filepath.Join(tmp, "bin")
	if out, err := goCmd(tmp, append(env, "GOBIN="+bin), "install", r.root+"/cmd/retrysafe@"+v); err != nil {
		t.Fatalf("go install %s/cmd/retrysafe@%s: %v\n%s", r.root, v, err, out)
	}
	info, err := goCmd(tmp, nil, "version", "-m", filepath.Join(bin, "retrysafe"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mod\t" + r.root + "/cmd/retrysafe\t" + v + "\t", "dep\t" + r.root + "\t" + v + "\t"} {
		if !strings.Contains(info, want) {
			t.Errorf("go version -m retrysafe lacks %q:\n%s", want, info)
		}
	}
	if help, _ := run(tmp, nil, filepath.Join(bin, "retrysafe"), "help"); !strings.Contains(help, "retrysafe key") {
		t.Errorf("retrysafe help says:\n%s", help)
	}

	step("installed")
	// An exported signature changes: the API check fails, until the change
	// is accepted.
	fn := changeSignature(t, filepath.Join(clone, "persistence"))
	out.Reset()
	if _, err := r.apiCheck(&out); err == nil || !strings.Contains(out.String(), fn) || !strings.Contains(out.String(), "NOT ACCEPTED") {
		t.Fatalf("apicheck after changing %s: %v\n%s", fn, err, &out)
	}
	t.Logf("apicheck after changing %s:\n%s", fn, &out)
	step("apicheck failed")
	var lines []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, r.root+": ") {
			lines = append(lines, line)
		}
	}
	writeFiles(t, clone, map[string]string{acceptedFile: acceptedHeader + strings.Join(lines, "\n") + "\n"})
	out.Reset()
	if _, err := r.apiCheck(&out); err != nil || !strings.Contains(out.String(), "(accepted)") {
		t.Errorf("apicheck with the change accepted: %v\n%s", err, &out)
	}
	step("apicheck accepted")
	// Accepted or not, an incompatible change is not a patch release.
	mustGit(t, clone, "commit", "-q", "-a", "-m", "change "+fn)
	out.Reset()
	patch := strings.TrimSuffix(v, ".0") + ".1"
	if err := r.release(&out, patch, false); err == nil || !strings.Contains(err.Error(), "need a new minor version") {
		t.Errorf("release %s after an incompatible change: %v\n%s", patch, err, &out)
	}
}

func bumpMinor(t *testing.T, v string) string {
	t.Helper()
	var major, minor int
	if _, err := fmt.Sscanf(semver.MajorMinor(v), "v%d.%d", &major, &minor); err != nil {
		t.Fatalf("%s: %v", v, err)
	}
	return fmt.Sprintf("v%d.%d.0", major, minor+1)
}

// cloneWorkTree clones the repository of src into dst at HEAD, and
// commits there what the work tree of src changes: the tracked files as
// they are, and the new files git would track.
func cloneWorkTree(t *testing.T, src, dst string) {
	t.Helper()
	head := mustGit(t, src, "rev-parse", "HEAD")
	mustGit(t, filepath.Dir(dst), "clone", "-q", "--no-checkout", src, dst)
	mustGit(t, dst, "checkout", "-q", "--detach", head)
	files := mustGit(t, src, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	for _, f := range strings.Split(files, "\x00") {
		if f == "" {
			continue
		}
		from, to := filepath.Join(src, filepath.FromSlash(f)), filepath.Join(dst, filepath.FromSlash(f))
		fi, err := os.Lstat(from)
		if os.IsNotExist(err) {
			os.Remove(to)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	mustGit(t, dst, "add", "-A")
	if _, err := git(dst, "diff", "--cached", "--quiet"); err != nil {
		mustGit(t, dst, "commit", "-q", "-m", "the work tree")
	}
}

// writeConsumer writes a main module in dir that requires version v of
// the root, otelidempotency, the PostgreSQL store and grpcidempotency,
// imports each of their packages but the internal and main ones, and
// prints the versions of this repository's modules that its build
// records.
func writeConsumer(t *testing.T, r *repo, dir, v string) {
	t.Helper()
	var imports []string
	for _, d := range []string{".", "otelidempotency", "persistence/postgres", "grpcidempotency"} {
		m := mod{dir: d, path: r.root}
		if d != "." {
			m.path = r.root + "/" + d
		}
		for _, pkg := range libraryPackages(t, filepath.Join(r.dir, m.subdir())) {
			imports = append(imports, "\t_ \""+path.Join(m.path, pkg)+"\"\n")
		}
	}
	writeFiles(t, dir, map[string]string{
		"go.mod": "module example.com/consumer\n\ngo 1.25.0\n\nrequire (\n" +
			"\t" + r.root + " " + v + "\n" +
			"\t" + r.root + "/otelidempotency " + v + "\n" +
			"\t" + r.root + "/persistence/postgres " + v + "\n" +
			"\t" + r.root + "/grpcidempotency " + v + "\n)\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\t\"runtime/debug\"\n\t\"strings\"\n\n" + strings.Join(imports, "") + ")\n\n" +
			"func main() {\n\tinfo, _ := debug.ReadBuildInfo()\n\tfor _, d := range info.Deps {\n" +
			"\t\tif strings.HasPrefix(d.Path, \"" + r.root + "\") {\n\t\t\tfmt.Println(d.Path, d.Version)\n\t\t}\n\t}\n}\n",
	})
}

// libraryPackages returns the directories, relative and slash-separated,
// of the packages of the module in dir that another module can import:
// not main, not internal, not in testdata or a nested module.
func libraryPackages(t *testing.T, dir string) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if rel != "." && (name == "internal" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
			exists(filepath.Join(p, "go.mod"))) {
			return filepath.SkipDir
		}
		files, _ := filepath.Glob(filepath.Join(p, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
			if err != nil {
				return err
			}
			if af.Name.Name != "main" {
				pkgs = append(pkgs, rel)
			}
			break
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// changeSignature gives the first exported function of the package in dir
// (by name) one more parameter, a variadic one, so that its callers still
// compile while its type changes, and returns its name.
func changeSignature(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	type candidate struct {
		name, file string
		closing    token.Pos
		empty      bool
	}
	var cands []candidate
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range af.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Type.TypeParams != nil {
				continue
			}
			params := fd.Type.Params.List
			if n := len(params); n > 0 {
				if _, variadic := params[n-1].Type.(*ast.Ellipsis); variadic {
					continue
				}
			}
			cands = append(cands, candidate{fd.Name.Name, f, fd.Type.Params.Closing, len(params) == 0})
		}
	}
	if len(cands) == 0 {
		t.Fatalf("no exported function in %s to change", dir)
	}
	slices.SortFunc(cands, func(a, b candidate) int { return strings.Compare(a.name, b.name) })
	c := cands[0]
	src, err := os.ReadFile(c.file)
	if err != nil {
		t.Fatal(err)
	}
	at := fset.Position(c.closing).Offset
	extra := ", _ ...struct{}"
	if c.empty {
		extra = "_ ...struct{}"
	}
	src = append(src[:at:at], append([]byte(extra), src[at:]...)...)
	if err := os.WriteFile(c.file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return c.name
}

// TestVersionsAreTheGoCommands compares the versions this tool makes from
// the repository's history with the ones the go command makes when it
// fetches the same repository itself (GOPROXY=direct, the repository's URL
// pointed at this clone): the same pseudo-version, the same checksums of
// the zip and of the go.mod. So the go.sum lines written before a push
// hold after it, when the proxy makes the versions from the pushed commits.
func TestVersionsAreTheGoCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches the repository with the go command")
	}
	gitIdentity(t)
	r, err := openRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	head := mustGit(t, r.dir, "rev-parse", "HEAD")
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "gitconfig")
	writeFiles(t, tmp, map[string]string{"gitconfig": "[url \"file://" + filepath.ToSlash(r.dir) + "\"]\n\tinsteadOf = https://" + r.root + "\n" +
		"[protocol \"file\"]\n\tallow = always\n[safe]\n\tdirectory = *\n"})
	t.Setenv("GIT_CONFIG_GLOBAL", cfg)

	type download struct{ Version, Sum, GoModSum, Error string }
	fetch := func(name, query string, env ...string) download {
		t.Helper()
		env = append(env, "GOMODCACHE="+filepath.Join(tmp, name), "GOFLAGS=-modcacherw", "GOWORK=off", "GONOSUMDB="+r.root)
		out, err := goCmd(tmp, env, "mod", "download", "-json", query)
		var d download
		if jerr := json.Unmarshal([]byte(out), &d); jerr != nil || err != nil {
			t.Fatalf("go mod download %s: %v %v\n%s", query, err, jerr, out)
		}
		return d
	}
	for _, dir := range []string{".", "otelidempotency"} {
		m := mod{dir: dir, path: r.root}
		if dir != "." {
			m.path += "/" + dir
		}
		pv, err := r.pseudoVersion(m, head)
		if err != nil {
			t.Fatal(err)
		}
		proxy := filepath.Join(tmp, "proxy-"+path.Base(m.path))
		if err := r.writeProxy(proxy, []version{{m, pv, head}}); err != nil {
			t.Fatal(err)
		}
		ours := fetch("ours-"+path.Base(m.path), m.path+"@"+pv, "GOPROXY="+fileURL(proxy))
		gos := fetch("go-"+path.Base(m.path), m.path+"@"+head[:12], "GOPROXY=direct")
		if ours != gos {
			t.Errorf("%s at %s: this tool makes %+v, the go command %+v", m.path, head[:12], ours, gos)
		}
	}
}

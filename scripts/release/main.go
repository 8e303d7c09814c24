// Command release tags the modules of this repository and checks what a
// release needs. RELEASING.md says when to run which.
//
// Usage (from the repository, GOWORK=off go -C scripts/release run . CMD):
//
//	check [-dev]        every go.mod requires tagged versions of the repository's modules, and replaces none
//	                    (-dev: or pseudo-versions of commits in HEAD's history, as between releases)
//	tidy [-check]       go mod tidy of every module on its own (GOWORK=off), with the required versions
//	                    of the repository's modules made from its history (-check: fail instead of changing)
//	seed                put the versions of the repository's modules that the go.mod files require into
//	                    the module cache, made from the repository's history
//	apicheck            the API of each library module against its last release (apidiff)
//	proxy DIR           write a file-based module proxy (GOPROXY=file://DIR) of every tagged version
//	                    and every required version of the repository's modules
//	require REV         make every module require the pseudo-version of commit REV of the others, and tidy
//	tag [-n] vX.Y.Z     release vX.Y.Z: tag the root, then the modules that require it (-n: print the steps)
//
// The versions it makes from the repository's history are the ones the
// go command would download once the commits and tags are pushed: module
// zips from golang.org/x/mod/zip, pseudo-versions as the go command
// computes them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/mod/module"
)

func main() {
	if err := dispatch(os.Stdout, ".", os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

// dispatch runs the command args in the repository that holds dir.
func dispatch(w io.Writer, dir string, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: release check|tidy|seed|apicheck|proxy|require|tag (see its package doc)")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dev := fs.Bool("dev", false, "check: allow pseudo-versions of commits in HEAD's history")
	check := fs.Bool("check", false, "tidy: fail instead of changing")
	dryRun := fs.Bool("n", false, "tag: print the steps only")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	r, err := openRepo(dir)
	if err != nil {
		return err
	}
	switch args[0] {
	case "check":
		if errs := r.checkRequires(*dev); len(errs) > 0 {
			return errors.Join(errs...)
		}
		fmt.Fprintln(w, "release check: the modules require released versions of each other, and replace none")
		if *dev {
			fmt.Fprintln(w, "release check: (or pseudo-versions of commits in HEAD's history)")
		}
		return nil
	case "tidy":
		mods, err := r.modules()
		if err != nil {
			return err
		}
		if err := r.tidy(w, *check, mods); err != nil {
			return err
		}
		if *check {
			fmt.Fprintln(w, "release tidy: every go.mod and go.sum is tidy on its own")
		}
		return nil
	case "seed":
		proxy, err := r.seed()
		os.RemoveAll(proxy)
		return err
	case "apicheck":
		_, err := r.apiCheck(w)
		return err
	case "proxy":
		if fs.NArg() != 1 {
			return errors.New("usage: release proxy DIR")
		}
		return r.proxy(fs.Arg(0))
	case "require":
		if fs.NArg() != 1 {
			return errors.New("usage: release require REV")
		}
		return r.requireCommit(w, fs.Arg(0))
	case "tag":
		if fs.NArg() != 1 {
			return errors.New("usage: release tag [-n] vX.Y.Z")
		}
		return r.release(w, fs.Arg(0), *dryRun)
	}
	return fmt.Errorf("unknown command %q", strings.Join(args, " "))
}

// proxy writes into dir a file proxy of every tagged version of the work
// tree's modules, and of the versions that the go.mod files require.
func (r *repo) proxy(dir string) error {
	reqs, err := r.required()
	if err != nil {
		return err
	}
	mods, err := r.modules()
	if err != nil {
		return err
	}
	for _, m := range mods {
		for _, v := range r.versions(m) {
			reqs = append(reqs, module.Version{Path: m.path, Version: v})
		}
	}
	vs, err := r.closure(reqs)
	if err != nil {
		return err
	}
	return r.writeProxy(dir, vs)
}

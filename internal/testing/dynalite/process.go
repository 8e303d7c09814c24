package dynalite

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Process is the process of a local test server, started by Launch. The
// program it runs, a launcher, prints "listening <port>" on its standard
// output once the server accepts connections on that port, and exits when
// its standard input closes, that is, when the Go process that started it
// ends, however it ends. dynalite's launcher is one; DynamoDB Local's
// (internal/testing/dynamodblocal) is another.
type Process struct {
	// Port is the port the launcher printed.
	Port int

	name     string
	cmd      *exec.Cmd
	stdin    io.Closer
	output   *limitedWriter
	stopOnce sync.Once
	stopErr  error
	exited   chan struct{}
}

// Launch starts cmd, in a process group of its own, and waits for it to print
// "listening <port>". onLine, unless nil, sees each line of its standard
// output, that one included. The first 64 KiB of its standard output and
// error are kept for Output, and are in the error when it exits before
// listening or ctx ends first. name names the server in errors.
func Launch(ctx context.Context, name string, cmd *exec.Cmd, onLine func(string)) (*Process, error) {
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	output := &limitedWriter{n: 64 << 10}
	cmd.Stderr = output
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: starting %s: %w", name, cmd.Path, err)
	}
	p := &Process{
		name:   name,
		cmd:    cmd,
		stdin:  stdin,
		output: output,
		exited: make(chan struct{}),
	}

	ports := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(output, line)
			if onLine != nil {
				onLine(line)
			}
			if port, ok := strings.CutPrefix(line, "listening "); ok {
				select {
				case ports <- port:
				default:
				}
			}
		}
		_, _ = io.Copy(output, stdout)
	}()
	waitErr := make(chan error, 1)
	go func() {
		waitErr <- cmd.Wait()
		close(p.exited)
	}()

	select {
	case port := <-ports:
		if p.Port, err = strconv.Atoi(port); err != nil {
			_ = p.Stop()
			return nil, fmt.Errorf("%s: unexpected port %q", name, port)
		}
		return p, nil
	case err := <-waitErr:
		return nil, fmt.Errorf("%s: %s exited before listening (%v); output:\n%s", name, cmd.Path, err, output.String())
	case <-ctx.Done():
		_ = p.Stop()
		return nil, fmt.Errorf("%s: did not start listening: %w; output:\n%s", name, ctx.Err(), output.String())
	}
}

// Output returns what the process has printed so far, up to 64 KiB.
func (p *Process) Output() string { return p.output.String() }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Pid returns the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop kills the process and its process group, and waits for it to exit. It
// may be called more than once.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		killProcessGroup(p.cmd)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			p.stopErr = fmt.Errorf("%s (pid %d) did not exit", p.name, p.cmd.Process.Pid)
		}
	})
	return p.stopErr
}

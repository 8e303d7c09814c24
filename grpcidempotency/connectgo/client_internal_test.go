package connectgo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
)

// goAway has the message of net/http's error for a connection closed
// after a GOAWAY, whose type is unexported.
type goAway struct{}

func (goAway) Error() string {
	return `http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug=""`
}

// An error that Connect made of the transport's is a lost answer, whatever
// its code; an error that the server sent, or that the client made of
// anything else, is not.
func TestAttemptStatus(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, tc := range []struct {
		err  error
		want connect.Code
	}{
		{connect.NewError(connect.CodeUnknown, fmt.Errorf("read message: %w", reset)), connect.CodeUnavailable},
		{connect.NewError(connect.CodeUnknown, fmt.Errorf("read enveloped message: %w", io.ErrUnexpectedEOF)), connect.CodeUnavailable},
		{connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("protocol error: incomplete envelope: %w", reset)), connect.CodeUnavailable},
		{connect.NewError(connect.CodeUnknown, fmt.Errorf("read message: %w", goAway{})), connect.CodeUnavailable},
		{connect.NewError(connect.CodeCanceled, fmt.Errorf("read: %w", syscall.EPIPE)), connect.CodeUnavailable},
		{connect.NewWireError(connect.CodeInvalidArgument, errors.New("bad item")), connect.CodeInvalidArgument},
		{connect.NewWireError(connect.CodeUnknown, fmt.Errorf("read: %w", io.ErrUnexpectedEOF)), connect.CodeUnknown},
		{connect.NewError(connect.CodeInvalidArgument, errors.New("unmarshal message: proto: cannot parse invalid wire-format data")), connect.CodeInvalidArgument},
		{connect.NewError(connect.CodeCanceled, context.Canceled), connect.CodeCanceled},
	} {
		assert.Equal(t, tc.want, connect.Code(attemptStatus(t.Context(), tc.err).GetCode()), "%v", tc.err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := connect.NewError(connect.CodeUnknown, fmt.Errorf("read message: %w", reset))
	assert.Equal(t, connect.CodeUnknown, connect.Code(attemptStatus(ctx, err).GetCode()), "the call's context ended")
}

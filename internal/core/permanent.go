package core

import "errors"

// PermanentError marks a function's error as one to record and replay
// rather than release the key for (idempotency.Permanent). It lives here
// so that every entry point, the disabled ones included, hands callers the
// function's own error without the mark.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// IsPermanent reports whether err's chain holds an error marked with
// idempotency.Permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// Unmark removes the mark that idempotency.Permanent adds, so that callers
// see the function's own error.
func Unmark(err error) error {
	if p, ok := err.(*PermanentError); ok {
		return p.Err
	}
	return err
}

package core

import (
	"os"
	"reflect"
	"runtime"
	"strings"
)

// Environment variables, with the meaning they have in Powertools for AWS
// Lambda.
const (
	// EnvDisabled turns idempotency off when set to a true value.
	EnvDisabled = "POWERTOOLS_IDEMPOTENCY_DISABLED"
	// EnvFunctionName is set by Lambda to the function's name, which
	// starts the default key prefix.
	EnvFunctionName = "AWS_LAMBDA_FUNCTION_NAME"
)

// Disabled reports whether EnvDisabled is set to a true value: 1, true,
// yes, on, y or t, in any case, as Powertools reads it.
func Disabled() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvDisabled))) {
	case "1", "true", "yes", "on", "y", "t":
		return true
	}
	return false
}

// DefaultPrefix returns the key prefix of handler fn without
// WithKeyPrefix: Prefix of the function name from EnvFunctionName and the
// Go name of fn (see FuncName).
func DefaultPrefix(fn any) string {
	return Prefix(os.Getenv(EnvFunctionName), FuncName(fn))
}

// Prefix returns the default key prefix of a handler with the Go name
// handler ("main.handler", without its import path) in the Lambda function
// named function: "<function>.<handler>" ("orders.main.handler"); either
// alone when the other is empty; and "idempotency" when both are. The
// retrysafe command applies it to the names an operator gives.
func Prefix(function, handler string) string {
	switch {
	case function != "" && handler != "":
		return function + "." + handler
	case function != "":
		return function
	case handler != "":
		return handler
	}
	return "idempotency"
}

// FuncName returns the Go name of a function value without its import
// path: "main.handler", "orders.(*Service).Charge-fm"; "" for anything
// else.
func FuncName(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	f := runtime.FuncForPC(v.Pointer())
	if f == nil {
		return ""
	}
	name := f.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

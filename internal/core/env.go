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
// WithKeyPrefix: "<function name>.<Go name of fn>", with the function name
// from EnvFunctionName and the Go name without its import path
// ("orders.main.handler"); without the variable, the Go name alone; and
// "idempotency" when neither is known.
func DefaultPrefix(fn any) string {
	function, name := os.Getenv(EnvFunctionName), FuncName(fn)
	switch {
	case function != "" && name != "":
		return function + "." + name
	case function != "":
		return function
	case name != "":
		return name
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

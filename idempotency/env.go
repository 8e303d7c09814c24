package idempotency

import (
	"os"
	"reflect"
	"runtime"
	"strings"
)

// Environment variables read when a handler is wrapped, with the meaning
// they have in Powertools for AWS Lambda.
const (
	// EnvDisabled turns idempotency off when set to a true value: Wrap
	// returns the handler itself. For tests and local runs.
	EnvDisabled = "POWERTOOLS_IDEMPOTENCY_DISABLED"
	// EnvFunctionName is set by Lambda to the function's name, which starts
	// the default key prefix.
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

// DefaultKeyPrefix returns the key prefix Wrap uses for handler fn without
// WithKeyPrefix: "<function name>.<Go name of fn>", where the function name
// comes from AWS_LAMBDA_FUNCTION_NAME and the Go name is the package and
// function, for example "orders.main.handler"; without the variable, just
// the Go name.
func DefaultKeyPrefix(fn any) string {
	return defaultPrefix(funcName(fn))
}

func defaultPrefix(handlerName string) string {
	function := os.Getenv(EnvFunctionName)
	switch {
	case function != "" && handlerName != "":
		return function + "." + handlerName
	case function != "":
		return function
	case handlerName != "":
		return handlerName
	}
	return "idempotency"
}

// funcName returns the Go name of a function value without its import
// path: "main.handler", "orders.(*Service).Charge-fm".
func funcName(fn any) string {
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

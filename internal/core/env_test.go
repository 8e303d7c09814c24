package core

import "testing"

func TestPrefix(t *testing.T) {
	for _, tc := range []struct{ function, handler, want string }{
		{"orders", "main.handler", "orders.main.handler"},
		{"orders", "", "orders"},
		{"", "main.handler", "main.handler"},
		{"", "", "idempotency"},
	} {
		if got := Prefix(tc.function, tc.handler); got != tc.want {
			t.Errorf("Prefix(%q, %q) = %q, want %q", tc.function, tc.handler, got, tc.want)
		}
	}
}

func handler() {}

func TestDefaultPrefix(t *testing.T) {
	t.Setenv(EnvFunctionName, "orders")
	if got, want := DefaultPrefix(handler), "orders.core.handler"; got != want {
		t.Errorf("DefaultPrefix(handler) = %q, want %q", got, want)
	}
}

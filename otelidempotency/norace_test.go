//go:build !race

package otelidempotency_test

const raceEnabled = false

// Package testpb is the generated code of the service of the tests,
// testdata/proto/retrysafe/test/orders/v1/orders.proto.
package testpb

//go:generate go test -run TestGeneratedCodeIsCurrent -update

package chaos

import "testing"

// stores are the stores of TestChaos, in the order the long mode runs them.
var stores = []string{"memory", "dynamodb", "dynamodb-local", "dynamodb-local-tx", "redis"}

func newBackend(t *testing.T, name string) Backend {
	switch name {
	case "memory":
		return Memory()
	case "dynamodb":
		return DynamoDB(t)
	case "dynamodb-local":
		return DynamoDBLocal(t)
	case "dynamodb-local-tx":
		return DynamoDBLocalTransactions(t)
	case "redis":
		return Redis(t)
	}
	t.Fatalf("unknown store %q (want memory, dynamodb, dynamodb-local, dynamodb-local-tx or redis; the PostgreSQL stores are in persistence/postgres)", name)
	return nil
}

// TestChaos drives Wrap, Guard and the HTTP adapter over each store with
// injected faults and checks the invariant from the log of side effects.
func TestChaos(t *testing.T) {
	if !*flagLong {
		t.Parallel() // the long mode gives each store the whole machine
	}
	Test(t, stores, newBackend)
}

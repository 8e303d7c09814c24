package stepkill_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/internal/testing/stepkill"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// The PostgreSQL run is in persistence/postgres, whose module has the
// driver.

// TestKilledBetweenSteps kills calls of a three-step function 50 times,
// between and inside its steps, on DynamoDB Local and redis-server, and
// counts that the retries run no stored step again.
func TestKilledBetweenSteps(t *testing.T) {
	t.Run("dynamodb-local", func(t *testing.T) {
		t.Parallel()
		srv := dynamotest.DynamoDBLocal.Start(t)
		table := dynalite.TableName(t)
		if err := dynamodb.CreateTable(t.Context(), srv.NewClient(), table); err != nil {
			t.Fatal(err)
		}
		store, err := dynamodb.New(srv.NewClient(), table)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(stepkill.Run(t, store, stepkill.Config{}))
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		store, err := redisstore.New(redisserver.Start(t).NewClient())
		if err != nil {
			t.Fatal(err)
		}
		t.Log(stepkill.Run(t, store, stepkill.Config{}))
	})
}

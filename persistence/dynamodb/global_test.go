package dynamodb_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// A store told that its table is a global table of strong consistency
// refuses staged writes without sending them: such a table runs no
// transactions. The refusal proves that nothing was written, and says
// what to do; a commit without staged writes is an Update, and works.
func TestCommitOnAStrongGlobalTable(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name := srv.table(t)
		counter := &dynalite.Counter{}
		store := newStore(t, srv.NewClient(counter.Register), name, func(o *dynamodb.Options) {
			o.GlobalTable = dynamodb.GlobalTableStrong
		})
		rec := inProgress(wholeSecond())
		require.NoError(t, store.Put(t.Context(), rec, wholeSecond()))
		done := completed(rec, []byte(`"x"`))

		err := store.Commit(t.Context(), done, []any{increment("Counters", "a")})
		require.ErrorIs(t, err, persistence.ErrCommitCanceled)
		require.ErrorIs(t, err, persistence.ErrNoTransactions)
		var unsupported *dynamodb.TransactionsUnsupportedError
		require.ErrorAs(t, err, &unsupported)
		assert.Contains(t, err.Error(), "turn idempotency.WithTransactions off")
		assert.Contains(t, err.Error(), "multi-Region strong consistency")
		assert.Zero(t, counter.Attempts("TransactWriteItems"), "nothing was sent")
		got, err := store.Get(t.Context(), rec.Key)
		require.NoError(t, err)
		assert.Empty(t, recordtest.Diff(got, rec))

		require.NoError(t, store.Commit(t.Context(), done, nil))
		got, err = store.Get(t.Context(), rec.Key)
		require.NoError(t, err)
		assert.Empty(t, recordtest.Diff(got, done))
	})
}

func TestOptionsGlobalTableValues(t *testing.T) {
	for _, g := range []dynamodb.GlobalTable{"", dynamodb.GlobalTableStrong, dynamodb.GlobalTableHomeRegion, dynamodb.GlobalTableLastWriterWins} {
		_, err := dynamodb.New(&requestClient{}, "idempotency", func(o *dynamodb.Options) { o.GlobalTable = g })
		require.NoError(t, err, "%q", g)
	}
	_, err := dynamodb.New(&requestClient{}, "idempotency", func(o *dynamodb.Options) { o.GlobalTable = "EVENTUAL" })
	require.ErrorContains(t, err, "Options.GlobalTable")
}

// describeTableServer answers DescribeTable of IdempotencyTable with the
// recorded answer in testdata/file, as DynamoDB's endpoint would, and
// returns a client of it.
func describeTableServer(t *testing.T, file string) *awsdynamodb.Client {
	t.Helper()
	answer, err := os.ReadFile(filepath.Join("testdata", file))
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ TableName string }
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Amz-Target") != "DynamoDB_20120810.DescribeTable" || json.Unmarshal(body, &in) != nil || in.TableName != "IdempotencyTable" {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazon.coral.validate#ValidationException","message":"unexpected request"}`)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return awsdynamodb.NewFromConfig(dynalite.LocalConfig(srv.URL))
}

// CheckTable reads a table's replication from DescribeTable, with answers
// of the shape AWS documents for a table in one Region, a global table of
// eventual consistency (with MultiRegionConsistency, and without it, as
// tables made global before the modes existed answer), and one of strong
// consistency (three replicas, or two and a witness). A global table of
// eventual consistency is refused unless the options state how its keys
// are written; one of strong consistency must be described as one.
func TestCheckTableGlobalTables(t *testing.T) {
	const (
		none   = dynamodb.GlobalTable("")
		strong = dynamodb.GlobalTableStrong
		home   = dynamodb.GlobalTableHomeRegion
		lww    = dynamodb.GlobalTableLastWriterWins
	)
	for _, tc := range []struct {
		file        string
		consistency types.MultiRegionConsistency
		replicas    []string
		witnesses   []string
		accepted    []dynamodb.GlobalTable
	}{
		// A table of version 2017.11.29 looks like this too: an MREC
		// choice is accepted.
		{"describe-table-one-region.json", "", nil, nil, []dynamodb.GlobalTable{none, home, lww}},
		{"describe-table-mrec.json", types.MultiRegionConsistencyEventual, []string{"us-west-2", "eu-west-1"}, nil, []dynamodb.GlobalTable{home, lww}},
		{"describe-table-mrec-unstated.json", types.MultiRegionConsistencyEventual, []string{"us-west-2", "eu-west-1"}, nil, []dynamodb.GlobalTable{home, lww}},
		{"describe-table-mrsc.json", types.MultiRegionConsistencyStrong, []string{"us-east-2", "us-west-2"}, nil, []dynamodb.GlobalTable{strong}},
		{"describe-table-mrsc-witness.json", types.MultiRegionConsistencyStrong, []string{"us-east-2"}, []string{"us-west-2"}, []dynamodb.GlobalTable{strong}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			client := describeTableServer(t, tc.file)
			for _, described := range []dynamodb.GlobalTable{none, strong, home, lww} {
				err := dynamodb.CheckTable(t.Context(), client, "IdempotencyTable", func(o *dynamodb.Options) { o.GlobalTable = described })
				if slices.Contains(tc.accepted, described) {
					require.NoError(t, err, "Options.GlobalTable %q", described)
					continue
				}
				require.ErrorIs(t, err, dynamodb.ErrGlobalTable, "Options.GlobalTable %q", described)
				require.NotErrorIs(t, err, dynamodb.ErrKeySchema)
				var gt *dynamodb.GlobalTableError
				require.ErrorAs(t, err, &gt)
				assert.Equal(t, "IdempotencyTable", gt.Table)
				assert.Equal(t, tc.consistency, gt.Consistency)
				assert.Equal(t, tc.replicas, gt.Replicas)
				assert.Equal(t, tc.witnesses, gt.Witnesses)
				assert.Equal(t, described, gt.Described)
				switch {
				case tc.consistency == types.MultiRegionConsistencyStrong:
					assert.Contains(t, err.Error(), "set Options.GlobalTable to GlobalTableStrong")
					assert.Contains(t, err.Error(), "Store.Sweep")
				case tc.consistency != "" && described == none:
					assert.Contains(t, err.Error(), "GlobalTableHomeRegion")
					assert.Contains(t, err.Error(), "GlobalTableLastWriterWins")
				}
			}
			// The key schema is checked first.
			err := dynamodb.CheckTable(t.Context(), client, "IdempotencyTable", func(o *dynamodb.Options) { o.KeyAttr = "pk" })
			require.ErrorIs(t, err, dynamodb.ErrKeySchema)
		})
	}
}

package dynamodb_test

// Tests of idempotency.WithTransactions over the DynamoDB store against
// DynamoDB Local: a payment handler stages its ledger entry, which commits
// with the completion of its key, or not at all.

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/paytest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// ledger is a payment handler whose side effect is a ledger entry per
// order, staged in the completion of the order's key, and a balance that
// must cover the amount.
type ledger struct {
	srv      server
	entries  string // table of entries, by order
	balances string // table of counters: the balance is the "balance" counter
	runs     int
	err      error // returned after staging, when set
}

func newLedger(t *testing.T, srv server, balance int) *ledger {
	l := &ledger{srv: srv, entries: srv.counterTable(t), balances: srv.counterTable(t)}
	_, err := srv.NewClient().PutItem(t.Context(), &awsdynamodb.PutItemInput{
		TableName: &l.balances,
		Item: map[string]types.AttributeValue{
			"name": &types.AttributeValueMemberS{Value: "balance"},
			"n":    &types.AttributeValueMemberN{Value: strconv.Itoa(balance)},
		},
	})
	require.NoError(t, err)
	return l
}

// charge stages the ledger entry (which adds one to the order's counter in
// the entries table) and the debit of the balance, conditioned on it
// covering the amount.
func (l *ledger) charge(ctx context.Context, p paytest.Payment) (paytest.Charge, error) {
	l.runs++
	err := dynamodb.Stage(ctx, increment(l.entries, p.OrderID), types.TransactWriteItem{Update: &types.Update{
		TableName:                &l.balances,
		Key:                      map[string]types.AttributeValue{"name": &types.AttributeValueMemberS{Value: "balance"}},
		UpdateExpression:         aws.String("SET #n = #n - :amount"),
		ConditionExpression:      aws.String("#n >= :amount"),
		ExpressionAttributeNames: map[string]string{"#n": "n"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":amount": &types.AttributeValueMemberN{Value: strconv.Itoa(p.Amount)},
		},
	}})
	if err != nil {
		return paytest.Charge{}, err
	}
	if l.err != nil {
		return paytest.Charge{}, l.err
	}
	return paytest.Charge{ChargeID: "ch_" + p.OrderID, Amount: p.Amount}, nil
}

func (l *ledger) entriesOf(t *testing.T, p paytest.Payment) int {
	return count(t, l.srv.NewClient(), l.entries, p.OrderID)
}

func (l *ledger) balance(t *testing.T) int {
	return count(t, l.srv.NewClient(), l.balances, "balance")
}

func TestTransactionsCommitTheLedgerWithTheCompletion(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		_, store, counter := srv.setup(t)
		l := newLedger(t, srv, 10000)
		pay := paytest.Wrap(t, l.charge, store, idempotency.WithTransactions())
		p := paytest.New()

		first, err := pay(t.Context(), p)
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"PutItem": 1, "TransactWriteItems": 1}, counter.Snapshot(),
			"a first call: the reservation, and the commit of the ledger with the completion")
		counter.Reset()
		replay, err := pay(t.Context(), p)
		require.NoError(t, err)
		assert.Equal(t, first, replay)
		assert.Equal(t, 1, counter.Calls(), "a replay: the failed PutItem; got %s", counter)

		assert.Equal(t, 1, l.runs)
		assert.Equal(t, 1, l.entriesOf(t, p))
		assert.Equal(t, 10000-p.Amount, l.balance(t))
	})
}

// A handler error writes nothing it staged, and releases the key; a
// permanent error is recorded, and writes nothing either.
func TestTransactionsHandlerErrorWritesNothingStaged(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		_, store, counter := srv.setup(t)
		l := newLedger(t, srv, 10000)
		pay := paytest.Wrap(t, l.charge, store, idempotency.WithTransactions())
		p := paytest.New()

		l.err = errors.New("the card network timed out")
		_, err := pay(t.Context(), p)
		require.ErrorIs(t, err, l.err)
		assert.Equal(t, map[string]int{"PutItem": 1, "DeleteItem": 1}, counter.Snapshot())
		assert.Zero(t, l.entriesOf(t, p))

		l.err = idempotency.Permanent(errors.New("card declined"))
		counter.Reset()
		_, err = pay(t.Context(), p)
		require.Error(t, err)
		assert.Equal(t, map[string]int{"PutItem": 1, "UpdateItem": 1}, counter.Snapshot(), "a permanent error is recorded")
		_, err = pay(t.Context(), p)
		require.Error(t, err)
		assert.Equal(t, 2, l.runs, "the recorded error is replayed")
		assert.Zero(t, l.entriesOf(t, p))
		assert.Equal(t, 10000, l.balance(t))
	})
}

// A staged write whose condition fails (the balance does not cover the
// amount) cancels the commit: the caller gets a CommitError with
// DynamoDB's reasons, nothing is written, and the key is released.
func TestTransactionsCanceledCommitReleasesTheKey(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		l := newLedger(t, srv, 1000)
		pay := paytest.Wrap(t, l.charge, store, idempotency.WithTransactions())
		p := paytest.New() // 4200, over the balance

		_, err := pay(t.Context(), p)
		var commitErr *idempotency.CommitError
		require.ErrorAs(t, err, &commitErr)
		assert.False(t, commitErr.Unknown)
		require.ErrorAs(t, err, new(*idempotency.CommitError))
		require.ErrorAs(t, err, new(*persistence.CommitCanceledError))
		var reasons *types.TransactionCanceledException
		require.ErrorAs(t, err, &reasons)
		require.Len(t, reasons.CancellationReasons, 3, "the entry, the debit, the completion")
		assert.Equal(t, "None", aws.ToString(reasons.CancellationReasons[0].Code))
		assert.Equal(t, "ConditionalCheckFailed", aws.ToString(reasons.CancellationReasons[1].Code))
		assert.Equal(t, "None", aws.ToString(reasons.CancellationReasons[2].Code))
		assert.Zero(t, l.entriesOf(t, p))
		assert.Equal(t, 1000, l.balance(t))

		// The key was released: once the balance covers it, a retry runs.
		_, err = srv.NewClient().PutItem(t.Context(), &awsdynamodb.PutItemInput{TableName: &l.balances, Item: map[string]types.AttributeValue{
			"name": &types.AttributeValueMemberS{Value: "balance"}, "n": &types.AttributeValueMemberN{Value: "10000"},
		}})
		require.NoError(t, err)
		_, err = pay(t.Context(), p)
		require.NoError(t, err)
		assert.Equal(t, 2, l.runs)
		assert.Equal(t, 1, l.entriesOf(t, p))
	})
}

// An invocation that ran past its in-progress expiry, and whose key
// another invocation took over, commits nothing: its ledger entry is not
// written, and the newer invocation's is, once.
func TestTransactionsLateInvocationCommitsNothing(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		l := newLedger(t, srv, 100000)
		p := paytest.New()
		release := make(chan struct{})
		staged := make(chan struct{})
		slow := func(ctx context.Context, p paytest.Payment) (paytest.Charge, error) {
			c, err := l.charge(ctx, p)
			close(staged)
			<-release
			return c, err
		}
		slowPay := paytest.Wrap(t, slow, store, idempotency.WithTransactions())
		fastPay := paytest.Wrap(t, l.charge, store, idempotency.WithTransactions())

		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		late := make(chan error, 1)
		go func() { _, err := slowPay(ctx, p); late <- err }()
		<-staged
		<-ctx.Done() // the slow invocation's deadline, and its reservation's, pass
		time.Sleep(100 * time.Millisecond)
		_, err := fastPay(t.Context(), p)
		require.NoError(t, err, "the retry after the deadline takes the key over")
		close(release)

		err = <-late
		require.ErrorAs(t, err, new(*idempotency.CommitError))
		require.ErrorIs(t, err, persistence.ErrFenced)
		assert.Equal(t, 2, l.runs)
		assert.Equal(t, 1, l.entriesOf(t, p), "one ledger entry: the retry's")
		assert.Equal(t, 100000-p.Amount, l.balance(t))
	})
}

// With the local cache in front of the store, the commit goes through to
// DynamoDB and a replay in the same environment costs no request.
func TestTransactionsThroughTheLocalCache(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		_, store, counter := srv.setup(t)
		l := newLedger(t, srv, 10000)
		pay := paytest.Wrap(t, l.charge, memory.NewCache(store, 100), idempotency.WithTransactions())
		p := paytest.New()
		_, err := pay(t.Context(), p)
		require.NoError(t, err)
		counter.Reset()
		_, err = pay(t.Context(), p)
		require.NoError(t, err)
		assert.Zero(t, counter.Calls(), "a cached replay; got %s", counter)
		assert.Equal(t, 1, l.entriesOf(t, p))
	})
}

// On a server without transactions (dynalite), a commit is refused with
// an error that says so and what to do, nothing is written, and the key is
// released at once: a retry runs again rather than waiting out the
// reservation with *InProgressError.
func TestTransactionsOnAServerWithoutThem(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		if srv.Transactions {
			t.Skipf("%s has TransactWriteItems", srv.Kind.Title)
		}
		_, store, _ := srv.setup(t)
		l := newLedger(t, srv, 1000)
		pay := idempotency.Must(idempotency.Wrap(l.charge, store, idempotency.WithKey("order_id"),
			idempotency.WithTransactions(), idempotency.WithLogger(slog.New(slog.DiscardHandler))))
		p := paytest.New()
		for attempt := 1; attempt <= 2; attempt++ {
			_, err := pay(t.Context(), p)
			var commitErr *idempotency.CommitError
			require.ErrorAs(t, err, &commitErr, "attempt %d", attempt)
			assert.False(t, commitErr.Unknown, "nothing was written, and the error proves it")
			require.ErrorIs(t, err, persistence.ErrNoTransactions)
			assert.Contains(t, err.Error(), "turn idempotency.WithTransactions off")
			require.NotErrorIs(t, err, idempotency.ErrInProgress)
		}
		assert.Equal(t, 2, l.runs, "the key is released, and the retry runs")
		assert.Zero(t, l.entriesOf(t, p))
		assert.Equal(t, 1000, l.balance(t))
	})
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"time"

	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"

	"github.com/retrysafe/retrysafe/persistence"
)

// store is the part of a store the commands use: the library's own
// reads and writes of its records, with the layout the flags describe,
// and errors that say which store failed and what a failure means.
type store struct {
	name    string // in messages
	records records
	// sweeper deletes expired records, for a store that may not do it
	// itself (PostgreSQL, DynamoDB); nil for Redis.
	sweeper sweeper
	// selfSweeping says why the store deletes its expired records
	// itself, so that sweep has nothing to do: "" when it does not. Nil
	// for a store that never does (PostgreSQL).
	selfSweeping func(context.Context) (string, error)
	// explain adds what an error of the store means; the errors that
	// commands act on, persistence.ErrNotFound and ErrChanged, pass as
	// they are.
	explain func(error) error
	close   func() error
	// requestTimeout and timeout are the flags' limits, for messages.
	requestTimeout, timeout time.Duration
}

// records are a store of the library's, as operators' tools use it.
type records interface {
	persistence.Admin
	Get(ctx context.Context, key string) (*persistence.Record, error)
}

// sweeper is a store that deletes its expired records when asked:
// postgres.Store.Sweep, dynamodb.Store.Sweep.
type sweeper interface {
	Sweep(ctx context.Context, now time.Time, limit int) (int64, error)
}

// Get reads the record for key: persistence.ErrNotFound without one.
func (s *store) Get(ctx context.Context, key string) (*persistence.Record, error) {
	rec, err := s.records.Get(ctx, key)
	return rec, s.explained(ctx, err)
}

// List calls page with the records whose key starts with prefix, a page
// at a time, without their responses.
func (s *store) List(ctx context.Context, prefix string, pageSize int, page func([]*persistence.Record) error) error {
	return s.explained(ctx, s.records.List(ctx, prefix, pageSize, page))
}

// DeleteRecord deletes the record seen if it is still that record:
// persistence.ErrChanged otherwise, persistence.ErrNotFound when it is
// gone.
func (s *store) DeleteRecord(ctx context.Context, seen *persistence.Record) error {
	return s.explained(ctx, s.records.DeleteRecord(ctx, seen))
}

// SelfSweeping says why the store deletes its expired records itself:
// "" when sweep must.
func (s *store) SelfSweeping(ctx context.Context) (string, error) {
	if s.selfSweeping == nil {
		return "", nil
	}
	why, err := s.selfSweeping(ctx)
	return why, s.explained(ctx, err)
}

// Sweep deletes up to limit records expired at now, for a store with a
// sweeper.
func (s *store) Sweep(ctx context.Context, now time.Time, limit int) (int64, error) {
	n, err := s.sweeper.Sweep(ctx, now, limit)
	return n, s.explained(ctx, err)
}

func (s *store) String() string { return s.name }

func (s *store) Close() error { return s.close() }

func (s *store) explained(ctx context.Context, err error) error {
	var f *failure
	switch {
	case err == nil, errors.Is(err, persistence.ErrNotFound), errors.Is(err, persistence.ErrChanged), errors.As(err, &f):
		return err
	}
	if t := timedOut(ctx, s.name, err, s.requestTimeout, s.timeout); t != nil {
		return t
	}
	return s.explain(err)
}

// timedOut returns the failure of a request to the store named name that
// ended with err, when it ended because the command's deadline passed or
// the store did not answer in time; nil otherwise. The SDKs' own messages
// for these (attempts, URLs, a canceled request) say less than the flag
// that sets the limit.
func timedOut(ctx context.Context, name string, err error, requestTimeout, timeout time.Duration) error {
	var netErr net.Error
	switch {
	case errors.Is(context.Cause(ctx), errTimeout):
		return fail(exitStore, "%s: not done within %s, the --timeout (0 for no limit)", name, duration(timeout))
	case ctx.Err() == nil && (errors.As(err, &netErr) && netErr.Timeout() || errors.Is(err, context.DeadlineExceeded)):
		return fail(exitStore, "%s: no answer within %s, the --request-timeout: check the address, "+
			"and what is between (a port forward, a proxy, a VPN)", name, duration(requestTimeout))
	}
	return nil
}

// errTimeout is the cause of the context of a command past its --timeout.
var errTimeout = errors.New("the command's deadline passed")

// storeFlags are the flags that name a store and its layout: those of
// the store's options in the function that writes the records.
type storeFlags struct {
	table, redisURL, postgresURL             string
	cluster                                  bool
	pgTable, pgSchema                        string
	profile, region                          string
	keyAttr, sortKeyAttr, staticPK, pkFnName string
	redisPrefix                              string
	attrs                                    []string // by attrNames
	requestTimeout, timeout                  time.Duration
}

// The default limits of the flags --request-timeout and --timeout: a
// store answers in milliseconds; a scan of a large table, at its --rate,
// takes minutes.
const (
	defaultRequestTimeout = 5 * time.Second
	defaultTimeout        = 10 * time.Minute
)

// attrNames are the attributes (DynamoDB) or hash fields (Redis) of a
// record, in the order of storeFlags.attrs, with where each goes in the
// stores' options; redis is nil for DynamoDB's own.
var attrNames = []struct {
	flag, what string
	dynamo     func(*ddbstore.Options) *string
	redis      func(*redisstore.Fields) *string
}{
	{"status-attr", "the status", func(o *ddbstore.Options) *string { return &o.StatusAttr }, func(f *redisstore.Fields) *string { return &f.Status }},
	{"expiry-attr", "the expiry, in epoch seconds", func(o *ddbstore.Options) *string { return &o.ExpiryAttr }, func(f *redisstore.Fields) *string { return &f.Expiration }},
	{"in-progress-expiry-attr", "the in-progress expiry, in epoch milliseconds", func(o *ddbstore.Options) *string { return &o.InProgressExpiryAttr }, func(f *redisstore.Fields) *string { return &f.InProgressExpiration }},
	{"data-attr", "the response", func(o *ddbstore.Options) *string { return &o.DataAttr }, func(f *redisstore.Fields) *string { return &f.Data }},
	{"validation-attr", "the payload hash", func(o *ddbstore.Options) *string { return &o.ValidationKeyAttr }, func(f *redisstore.Fields) *string { return &f.Validation }},
	{"token-attr", "the owner token", func(o *ddbstore.Options) *string { return &o.TokenAttr }, func(f *redisstore.Fields) *string { return &f.Token }},
	{"error-type-attr", "a recorded error's type", func(o *ddbstore.Options) *string { return &o.ErrorTypeAttr }, func(f *redisstore.Fields) *string { return &f.ErrorType }},
	{"error-message-attr", "a recorded error's message", func(o *ddbstore.Options) *string { return &o.ErrorMessageAttr }, func(f *redisstore.Fields) *string { return &f.ErrorMessage }},
	{"response-omitted-attr", "the mark of a response too large to store", func(o *ddbstore.Options) *string { return &o.ResponseOmittedAttr }, func(f *redisstore.Fields) *string { return &f.ResponseOmitted }},
	{"data-encoding-attr", "the response's compression (DynamoDB)", func(o *ddbstore.Options) *string { return &o.DataEncodingAttr }, nil},
}

func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.table, "table", "", "the DynamoDB `table` (default $IDEMPOTENCY_TABLE)")
	fs.StringVar(&s.profile, "profile", "", "the AWS shared configuration `profile` (default $AWS_PROFILE)")
	fs.StringVar(&s.region, "region", "", "the AWS `region` (default the profile's, or $AWS_REGION)")
	fs.StringVar(&s.keyAttr, "key-attr", "", "the table's partition key `attribute` (store default id)")
	fs.StringVar(&s.sortKeyAttr, "sort-key-attr", "", "the table's sort key `attribute`, when records share a table (Options.SortKeyAttr)")
	fs.StringVar(&s.staticPK, "static-pk", "", "with a sort key, the partition key `value` of the records (default idempotency#<function>)")
	fs.StringVar(&s.pkFnName, "pk-function", "", "with a sort key, the Lambda function `name` in the default partition key value, idempotency#<name> (default $AWS_LAMBDA_FUNCTION_NAME)")
	fs.StringVar(&s.redisURL, "redis", "", "the Redis or Valkey `URL` (redis://, rediss:// for TLS), instead of a table")
	fs.BoolVar(&s.cluster, "cluster", false, "the Redis URL is a cluster's (redis://host:port?addr=host2:port...)")
	fs.StringVar(&s.redisPrefix, "redis-prefix", "", "the `prefix` of the records' Redis keys (Options.KeyPrefix)")
	fs.StringVar(&s.postgresURL, "postgres", "", "the PostgreSQL connection `URL` (postgres://user:password@host:port/database?sslmode=require, "+
		"or a keyword/value string; PG* variables fill in what it leaves out), instead of a table")
	fs.StringVar(&s.pgTable, "pg-table", "", "the PostgreSQL `table` of the records (default "+defaultPgTable+")")
	fs.StringVar(&s.pgSchema, "pg-schema", "", "the `schema` of the PostgreSQL table (Options.Schema; default the search_path's)")
	fs.DurationVar(&s.requestTimeout, "request-timeout", defaultRequestTimeout, "give up on a request the store does not answer within `duration` "+
		"(each attempt, of the SDK's three for DynamoDB; for PostgreSQL, the connection and each statement)")
	fs.DurationVar(&s.timeout, "timeout", defaultTimeout, "give up when the store's requests take longer than `duration` in all; 0 for no limit")
	s.attrs = make([]string, len(attrNames))
	for i, a := range attrNames {
		fs.StringVar(&s.attrs[i], a.flag, "", "the `name` of "+a.what+", when the store's options rename it")
	}
}

// open opens the store the flags name.
func (s *storeFlags) open(ctx context.Context, e *env) (*store, error) {
	switch {
	case s.requestTimeout <= 0:
		return nil, usageError("--request-timeout %v: want more than 0", s.requestTimeout)
	case s.timeout < 0:
		return nil, usageError("--timeout %v: want 0 (no limit) or more", s.timeout)
	}
	table := s.table
	if table == "" && s.redisURL == "" && s.postgresURL == "" {
		table = e.getenv("IDEMPOTENCY_TABLE")
	}
	given := 0
	for _, v := range []string{table, s.redisURL, s.postgresURL} {
		if v != "" {
			given++
		}
	}
	dynamoOnly := s.keyAttr != "" || s.sortKeyAttr != "" || s.staticPK != "" || s.pkFnName != "" || s.profile != "" || s.region != ""
	switch {
	case given > 1:
		return nil, usageError("give one store: a table, a Redis URL or a PostgreSQL URL, not more")
	case s.postgresURL == "" && (s.pgTable != "" || s.pgSchema != ""):
		return nil, usageError("--pg-table and --pg-schema are for PostgreSQL: give --postgres too")
	case table != "":
		if s.cluster || s.redisPrefix != "" {
			return nil, usageError("--cluster and --redis-prefix are for Redis; a table is DynamoDB")
		}
		return openDynamoDB(ctx, e, s, table)
	case s.redisURL != "":
		if dynamoOnly {
			return nil, usageError("--key-attr, --sort-key-attr, --static-pk, --pk-function, --profile and --region are for DynamoDB; a Redis URL is Redis")
		}
		return openRedis(ctx, s)
	case s.postgresURL != "":
		if dynamoOnly || s.cluster || s.redisPrefix != "" {
			return nil, usageError("--key-attr, --sort-key-attr, --static-pk, --pk-function, --profile, --region, --cluster and --redis-prefix " +
				"are for DynamoDB and Redis; a PostgreSQL URL is PostgreSQL (--pg-table, --pg-schema)")
		}
		return openPostgres(ctx, s)
	}
	return nil, usageError("no store: give --table (or set IDEMPOTENCY_TABLE), --redis or --postgres")
}

// use opens the store and runs fn with it, under the deadline of
// --timeout, and closes the store when fn returns.
func (s *storeFlags) use(ctx context.Context, e *env, fn func(context.Context, *store) error) error {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	st, err := s.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(ctx, st)
}

// deadline returns ctx with the deadline of --timeout: the time the
// store's requests may take in all, from now.
func (s *storeFlags) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout == 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, s.timeout, errTimeout)
}

// attrHint names the flags that rename attributes, for messages about
// records that lack them.
const attrHint = "give the names the function's store uses (--status-attr, --expiry-attr, ...; 'retrysafe help get' lists them)"

// checkRecord fails for a record that lacks what every record has: a
// sign that the store's attributes are named otherwise than the flags say.
func checkRecord(st *store, rec *persistence.Record) error {
	if rec.Status == "" || rec.ExpiresAt.IsZero() {
		return fmt.Errorf("%s: the record %q has no status or no expiry: the store names its attributes otherwise; %s", st, rec.Key, attrHint)
	}
	return nil
}

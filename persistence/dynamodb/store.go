package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/internal/epoch"
	"github.com/retrysafe/retrysafe/persistence"
)

// Client is the part of the DynamoDB API a Store uses; *dynamodb.Client
// (github.com/aws/aws-sdk-go-v2/service/dynamodb) satisfies it. Tests may
// pass their own implementation.
type Client interface {
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, params *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	// TransactWriteItems is what Commit sends (idempotency.WithTransactions).
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ Client = (*dynamodb.Client)(nil)

// Store is a persistence.Store backed by a DynamoDB table. It is safe for
// concurrent use. Each method sends one request (see the package
// documentation).
type Store struct {
	client   Client
	table    string
	opts     Options
	names    [numAttrs]string
	staticPK types.AttributeValue

	putCond  string
	putNames map[string]string

	// updates are the update expressions and their names, by the mask of
	// the optional attributes present (see update), each built when a
	// write first needs it.
	updates    [1 << numOptional]atomic.Pointer[update]
	updateCond string
	renewCond  string

	deleteCond  string
	deleteNames map[string]string
}

var _ persistence.Store = (*Store)(nil)

// New returns a Store that keeps records in table through client. optFns
// adjust the [Options], whose zero values are Powertools' defaults:
//
//	store, err := dynamodb.New(client, "IdempotencyTable", func(o *dynamodb.Options) {
//		o.SortKeyAttr = "sk"
//	})
//
// New sends no request. It returns an error in these cases:
//
//   - client is nil.
//   - table is shorter than 3 characters (DynamoDB's minimum).
//   - Two attributes have one name.
//   - StaticPKValue is set without SortKeyAttr.
//   - MaxItemSize is outside 1 to 400 KB.
//   - GlobalTable is none of its values.
func New(client Client, table string, optFns ...func(*Options)) (*Store, error) {
	if client == nil {
		return nil, errors.New("persistence/dynamodb: nil client")
	}
	if len(table) < 3 {
		return nil, fmt.Errorf("persistence/dynamodb: table name %q is shorter than 3 characters", table)
	}
	opts, err := resolveOptions(optFns)
	if err != nil {
		return nil, err
	}
	s := &Store{
		client: client,
		table:  table,
		opts:   opts,
		names:  opts.attrNames(),
	}
	if opts.SortKeyAttr != "" {
		s.staticPK = &types.AttributeValueMemberS{Value: opts.StaticPKValue}
	}
	name := func(i int) string { return "#" + placeholders[i] }
	value := func(i int) string { return ":" + placeholders[i] }

	// docs/protocol.md, reserve: applies over no record, or one that is
	// not live (takeover); conflict otherwise. Powertools' condition,
	// without its
	// attribute_exists(in_progress_expiration), which a comparison implies
	// (a comparison with a missing attribute is false). :now and :now_ms
	// are the current time rounded up to the second and to the
	// millisecond, which makes "stored < rounded up now" exactly
	// Record.Live's "stored time before now" for times stored in whole
	// seconds and milliseconds.
	// A held reservation (Record.Held) is never taken over when it lapses.
	//
	// The conditions are written without parentheses: AND binds tighter
	// than OR in DynamoDB's expressions (its guide, Precedence in
	// conditions), so "a OR b OR c AND d AND e" is "a OR b OR (c AND d
	// AND e)". Parentheses cost dynalite's expression parser about 0.35 ms
	// a request (0.45 ms more than the bare attribute_not_exists(id) with
	// them, 0.1 ms without), and a client that waits longer for its reply
	// spends more CPU waiting.
	s.putCond = "attribute_not_exists(#k) OR " + name(attrExpiry) + " < :now OR " +
		name(attrStatus) + " = :p AND " + name(attrInProgressExpiry) + " < :now_ms AND attribute_not_exists(" + name(attrHeld) + ")"
	s.putNames = map[string]string{
		"#k":                       opts.KeyAttr,
		name(attrExpiry):           opts.ExpiryAttr,
		name(attrStatus):           opts.StatusAttr,
		name(attrInProgressExpiry): opts.InProgressExpiryAttr,
		name(attrHeld):             opts.HeldAttr,
	}

	// docs/protocol.md, renew, complete, record an error: only the
	// caller's own reservation, its token and in progress. The token
	// alone would let a renewal applied late reopen a completed record.
	s.updateCond = name(attrToken) + " = " + value(attrToken) + " AND " + name(attrStatus) + " = :p"
	// A renewal also never shortens the lease: an earlier renewal's
	// attempt applied after a later renewal must change nothing.
	s.renewCond = s.updateCond + " AND " + name(attrInProgressExpiry) + " <= " + value(attrInProgressExpiry)

	// docs/protocol.md, release: only the caller's own reservation; a
	// record that is already gone counts as released (done).
	s.deleteCond = "attribute_not_exists(#k) OR " + name(attrToken) + " = " + value(attrToken) + " AND " + name(attrStatus) + " = :p"
	s.deleteNames = map[string]string{
		"#k":             opts.KeyAttr,
		name(attrToken):  opts.TokenAttr,
		name(attrStatus): opts.StatusAttr,
	}
	return s, nil
}

// update is an UpdateItem's update expression and its attribute names.
type update struct {
	expr  string
	names map[string]string
}

// update returns the update expression and names for the optional
// attributes present in mask (bit i-firstOptional for attribute i).
//
// Completion (and renewal): the record is the caller's own (the condition
// checks its token), as its reservation wrote it, so the update writes
// only what changes: the status, the expiry and the result's attributes
// present, and removes the optional attributes the record has no value
// for (the hold, and the in-progress expiry of a record without one). The
// token and the payload hash stay as the reservation wrote them. One
// expression, and one set of names (which DynamoDB wants exactly as
// used), per combination of the optional attributes present: built when
// first used, since a store sends few of the 256 (building them all would
// cost a function's cold start most of a millisecond), and kept. Two
// writes that build one at once build equal ones, and either is kept.
func (s *Store) update(mask int) *update {
	if u := s.updates[mask].Load(); u != nil {
		return u
	}
	name := func(i int) string { return "#" + placeholders[i] }
	var set, remove []string
	names := map[string]string{name(attrToken): s.names[attrToken]}
	for i := range numAttrs {
		present := i < firstOptional || mask&(1<<(i-firstOptional)) != 0
		switch {
		case i == attrToken || i == attrValidation:
			continue
		case present:
			set = append(set, name(i)+" = "+valuePlaceholders[i])
		case i == attrInProgressExpiry || i == attrHeld:
			// The reservation may have written them; a completed
			// record has neither.
			remove = append(remove, name(i))
		default:
			continue // never written by the reservation
		}
		names[name(i)] = s.names[i]
	}
	expr := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		expr += " REMOVE " + strings.Join(remove, ", ")
	}
	u := &update{expr: expr, names: names}
	s.updates[mask].Store(u)
	return u
}

// valuePlaceholders are the expression attribute value placeholders of the
// attributes, by index.
var valuePlaceholders = func() (p [numAttrs]string) {
	for i := range p {
		p[i] = ":" + placeholders[i]
	}
	return p
}()

// The values of the two statuses, shared by every request (the SDK only
// reads them).
var (
	inProgressValue = &types.AttributeValueMemberS{Value: string(persistence.StatusInProgress)}
	completedValue  = &types.AttributeValueMemberS{Value: string(persistence.StatusCompleted)}
)

// Put implements [persistence.Store] with one conditional PutItem. When a
// live record holds the key, it returns a [*persistence.ConflictError].
// Its Existing is the record DynamoDB returned with the failed condition
// (ReturnValuesOnConditionCheckFailure ALL_OLD). Existing is nil when the
// server did not return it (dynalite, older DynamoDB Local). The caller
// then reads it with Get. Other failures are returned wrapped.
func (s *Store) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	if err := checkKey(rec.Key); err != nil {
		return err
	}
	v := s.encode(rec)
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                &s.table,
		Item:                     s.item(rec.Key, &v),
		ConditionExpression:      &s.putCond,
		ExpressionAttributeNames: s.putNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now":    number(epoch.CeilSeconds(now)),
			":now_ms": number(epoch.CeilMillis(now)),
			":p":      inProgressValue,
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, writeOptions...)
	if err == nil {
		return nil
	}
	var failed *types.ConditionalCheckFailedException
	if !errors.As(err, &failed) {
		return fmt.Errorf("persistence/dynamodb: put %q: %w", rec.Key, err)
	}
	conflict := &persistence.ConflictError{}
	if len(failed.Item) > 0 {
		// An item that does not decode is left to Get to report.
		if existing, err := s.decode(failed.Item); err == nil {
			conflict.Existing = existing
		}
	}
	return conflict
}

// Get implements persistence.Store with a strongly consistent GetItem. It
// returns persistence.ErrNotFound when there is no record for key, and other
// failures wrapped.
func (s *Store) Get(ctx context.Context, key string) (*persistence.Record, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	consistent := true
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            s.key(key),
		ConsistentRead: &consistent,
	})
	if err != nil {
		return nil, fmt.Errorf("persistence/dynamodb: get %q: %w", key, err)
	}
	if len(out.Item) == 0 {
		return nil, persistence.ErrNotFound
	}
	return s.decode(out.Item)
}

// Update implements [persistence.Store] with one UpdateItem. It is
// conditioned on the record being the caller's own reservation: its owner
// token, in progress. A completion refused because the caller's own
// completion is there already succeeds. It is read with a GetItem, on that
// path only.
//
// Update returns an error wrapping [persistence.ErrFenced] when the stored
// record is not the caller's reservation. It returns one wrapping
// [persistence.ErrResponseOmitted] when it completed the record without
// its response. That happens when the item would have been larger than
// MaxItemSize even with the response compressed. Other failures are
// returned wrapped.
func (s *Store) Update(ctx context.Context, rec *persistence.Record) error {
	if err := checkKey(rec.Key); err != nil {
		return err
	}
	in, omitted := s.updateInput(rec)
	_, err := s.client.UpdateItem(ctx, in, writeOptions...)
	if err != nil {
		var failed *types.ConditionalCheckFailedException
		if errors.As(err, &failed) {
			return s.refused(ctx, "update", rec, omitted)
		}
		return fmt.Errorf("persistence/dynamodb: update %q: %w", rec.Key, err)
	}
	return omitted
}

// refused answers a completion or renewal of rec whose condition failed:
// the record is not the caller's own reservation. A completion that finds
// the caller's own completed record was applied by an earlier attempt
// whose reply was lost (docs/protocol.md, done): it succeeds, with omitted
// as that attempt had it. Any other record fences the caller out. The
// record is read to tell the two apart, on this rare path only, so that
// completions need not ask for the old item (which dynalite ignores).
func (s *Store) refused(ctx context.Context, op string, rec *persistence.Record, omitted error) error {
	existing, err := s.Get(ctx, rec.Key)
	switch {
	case err == nil && existing.Token == rec.Token && done(existing, rec):
		return omitted
	case err != nil && !errors.Is(err, persistence.ErrNotFound):
		// The write was refused, but whether an earlier attempt applied
		// it is unknown.
		return fmt.Errorf("persistence/dynamodb: %s %q: refused, and reading the record failed: %w", op, rec.Key, err)
	}
	return fmt.Errorf("persistence/dynamodb: %s %q: %w", op, rec.Key, persistence.ErrFenced)
}

// done reports whether the caller's own record existing already has the
// effect of the write rec (docs/protocol.md, done): a completion finds it
// completed, a renewal finds it in progress with an in-progress expiry no
// earlier than its own (a later renewal applied).
func done(existing, rec *persistence.Record) bool {
	if rec.Status == persistence.StatusCompleted {
		return existing.Status == persistence.StatusCompleted
	}
	return existing.Status == persistence.StatusInProgress && !existing.InProgressExpiresAt.Before(rec.InProgressExpiresAt)
}

// updateInput returns the UpdateItem request that replaces the record for
// rec.Key with rec, and the error (wrapping persistence.ErrResponseOmitted)
// that Update returns if it succeeds, because the response was left out.
func (s *Store) updateInput(rec *persistence.Record) (*dynamodb.UpdateItemInput, error) {
	v := s.encode(rec)
	omitted := s.fit(&v, rec.Key, rec.Response)
	v[attrValidation] = nil // the reservation wrote it, and it does not change
	n, mask := 0, 0
	for i, av := range v {
		if av != nil {
			n++
			if i >= firstOptional {
				mask |= 1 << (i - firstOptional)
			}
		}
	}
	// Sized to the values present (a completion has 5, with the
	// condition's :p 6), not to every attribute: a map of up to 8 is one
	// allocation, of 10 three.
	vals := make(map[string]types.AttributeValue, n+1)
	for i, av := range v {
		if av != nil {
			vals[valuePlaceholders[i]] = av
		}
	}
	vals[":p"] = inProgressValue // the condition's
	cond := &s.updateCond
	if rec.Status == persistence.StatusInProgress && v[attrInProgressExpiry] != nil {
		cond = &s.renewCond
	}
	u := s.update(mask)
	return &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       s.key(rec.Key),
		UpdateExpression:          &u.expr,
		ConditionExpression:       cond,
		ExpressionAttributeNames:  u.names,
		ExpressionAttributeValues: vals,
	}, omitted
}

// Delete implements [persistence.Store] with one DeleteItem. It is
// conditioned on the record being the caller's own reservation, its owner
// token and in progress. Or it is conditioned on the record being gone
// already. It returns an error wrapping [persistence.ErrFenced] for any
// other record, and other failures wrapped.
func (s *Store) Delete(ctx context.Context, key, token string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       s.key(key),
		ConditionExpression:       &s.deleteCond,
		ExpressionAttributeNames:  s.deleteNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{valuePlaceholders[attrToken]: str(token), ":p": inProgressValue},
	}, writeOptions...)
	if err != nil {
		var failed *types.ConditionalCheckFailedException
		if errors.As(err, &failed) {
			return fmt.Errorf("persistence/dynamodb: delete %q: %w", key, persistence.ErrFenced)
		}
		return fmt.Errorf("persistence/dynamodb: delete %q: %w", key, err)
	}
	return nil
}

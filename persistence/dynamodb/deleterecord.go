package dynamodb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/internal/epoch"
	"github.com/retrysafe/retrysafe/persistence"
)

// DeleteRecord deletes the record for seen.Key, but only if the stored
// record is still seen. That is the same status, owner token, expiry and
// in-progress expiry. It is for operators' tools, which delete a record
// they have read and shown. The library releases keys with [Store.Delete],
// which deletes only the caller's own reservation.
//
// It sends one DeleteItem conditioned on those attributes. When the
// condition fails, nothing is deleted. It then returns an error wrapping
// [persistence.ErrChanged], or [persistence.ErrNotFound] when there is no
// record any more. It tells the two apart with a GetItem. Other failures
// are returned wrapped.
func (s *Store) DeleteRecord(ctx context.Context, seen *persistence.Record) error {
	if err := checkKey(seen.Key); err != nil {
		return err
	}
	names := map[string]string{
		"#status": s.opts.StatusAttr,
		"#token":  s.opts.TokenAttr,
		"#exp":    s.opts.ExpiryAttr,
		"#ip_exp": s.opts.InProgressExpiryAttr,
	}
	values := map[string]types.AttributeValue{
		":status": str(string(seen.Status)),
		":token":  str(seen.Token),
		":exp":    number(seen.ExpiresAt.Unix()),
	}
	cond := "#status = :status AND #token = :token AND #exp = :exp AND "
	if seen.InProgressExpiresAt.IsZero() {
		cond += "attribute_not_exists(#ip_exp)"
	} else {
		cond += "#ip_exp = :ip_exp"
		values[":ip_exp"] = number(epoch.CeilMillis(seen.InProgressExpiresAt))
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       s.key(seen.Key),
		ConditionExpression:       &cond,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}, writeOptions...)
	var failed *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &failed):
		return fmt.Errorf("persistence/dynamodb: delete %q: %w", seen.Key, err)
	}
	// The record is not the one seen, or it is gone; if the read fails,
	// the first is the answer that deletes nothing.
	if _, err := s.Get(ctx, seen.Key); errors.Is(err, persistence.ErrNotFound) {
		return err
	}
	return fmt.Errorf("persistence/dynamodb: delete %q: %w", seen.Key, persistence.ErrChanged)
}

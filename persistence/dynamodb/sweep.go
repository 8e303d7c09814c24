package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/internal/epoch"
)

// Sweep deletes up to limit records that have expired at now (their expiry
// is before now), and returns how many it deleted. It is for tables
// without time to live. Global tables of multi-Region strong consistency
// do not support it, and other tables may have it off. Run Sweep on a
// schedule, and again while it deletes limit records. The store's client
// must have the methods Query and Scan as well, as *dynamodb.Client has.
//
// Deleting an expired record changes nothing for the library, which treats
// it as absent (docs/protocol.md, the states). Records in progress past
// their in-progress expiry but not their expiry are kept. Their invocation
// may still complete them. now is the sweeper's clock, as it is the
// caller's in a reservation. A clock ahead by δ deletes records up to δ
// before they expire.
//
// Sweep reads the records as List does, filtered on the expiry. That is a
// Query of the static partition key with [Options.SortKeyAttr], and a Scan
// of the table otherwise. It reads until it has deleted limit records or
// read them all. Each call reads from the start, and a scan reads every
// item, expired or not. Sweep deletes each expired record with a
// DeleteItem conditioned on its being expired still. A record taken over
// since it was read is thus kept, and not counted.
//
// On a global table of eventual consistency, run Sweep in the Region where
// the keys are written. A delete in another Region can win over a
// reservation that has not reached it yet (last writer wins).
//
// Sweep needs these actions:
//
//	dynamodb:Query or dynamodb:Scan
//	dynamodb:DeleteItem
func (s *Store) Sweep(ctx context.Context, now time.Time, limit int) (int64, error) {
	client, ok := s.client.(listClient)
	if !ok {
		return 0, fmt.Errorf("persistence/dynamodb: Sweep: the store's client, a %T, cannot Query and Scan", s.client)
	}
	if limit <= 0 {
		return 0, fmt.Errorf("persistence/dynamodb: Sweep: the limit must be positive, not %d", limit)
	}
	// The expiry is stored in whole seconds: "stored < now rounded up" is
	// "expired at now", as in the reservation's condition.
	names := map[string]string{"#e": s.opts.ExpiryAttr, "#k": s.opts.KeyAttr}
	projection := "#k"
	if s.opts.SortKeyAttr != "" {
		names["#s"] = s.opts.SortKeyAttr
		projection += ", #s"
	}
	values := map[string]types.AttributeValue{":now": number(epoch.CeilSeconds(now))}
	filter := "#e < :now"
	page := func(start map[string]types.AttributeValue) ([]map[string]types.AttributeValue, map[string]types.AttributeValue, error) {
		if s.opts.SortKeyAttr == "" {
			out, err := client.Scan(ctx, &dynamodb.ScanInput{
				TableName:                 &s.table,
				FilterExpression:          &filter,
				ProjectionExpression:      &projection,
				ExpressionAttributeNames:  names,
				ExpressionAttributeValues: values,
				ExclusiveStartKey:         start,
			})
			if err != nil {
				return nil, nil, err
			}
			return out.Items, out.LastEvaluatedKey, nil
		}
		cond := "#k = :pk"
		out, err := client.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &s.table,
			KeyConditionExpression:    &cond,
			FilterExpression:          &filter,
			ProjectionExpression:      &projection,
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": values[":now"], ":pk": s.staticPK},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, nil, err
		}
		return out.Items, out.LastEvaluatedKey, nil
	}

	deleteNames := map[string]string{"#e": s.opts.ExpiryAttr}
	var deleted int64
	var start map[string]types.AttributeValue
	for {
		items, last, err := page(start)
		if err != nil {
			return deleted, fmt.Errorf("persistence/dynamodb: sweeping table %q: %w", s.table, err)
		}
		for _, key := range items {
			_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
				TableName:                 &s.table,
				Key:                       key,
				ConditionExpression:       &filter,
				ExpressionAttributeNames:  deleteNames,
				ExpressionAttributeValues: values,
			}, writeOptions...)
			var failed *types.ConditionalCheckFailedException
			switch {
			case errors.As(err, &failed):
				continue // taken over, or deleted, since it was read
			case err != nil:
				return deleted, fmt.Errorf("persistence/dynamodb: sweeping table %q: %w", s.table, err)
			}
			if deleted++; deleted == int64(limit) {
				return deleted, nil
			}
		}
		if len(last) == 0 {
			return deleted, nil
		}
		start = last
	}
}

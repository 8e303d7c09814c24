package dynamodb

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/persistence"
)

// listClient is the part of the DynamoDB API that [Store.List] and
// [Store.Sweep] use on top of [Client]: Query and Scan, which
// *dynamodb.Client has.
type listClient interface {
	dynamodb.QueryAPIClient
	dynamodb.ScanAPIClient
}

var (
	_ listClient        = (*dynamodb.Client)(nil)
	_ persistence.Admin = (*Store)(nil)
)

// List implements [persistence.Admin]. It reads the store's records a page
// at a time, for operators' tools. The store's client must have the
// methods Query and Scan as well, as *dynamodb.Client has.
//
// With [Options.SortKeyAttr] set, List queries the static partition key,
// so it reads only the records of the store. Otherwise it scans the table.
// keyPrefix, when not empty, keeps the records whose key starts with it.
// A query has it in its key condition, and then reads only those. A scan
// has it in a filter, and reads every item all the same. pageSize bounds
// the items each request reads (DynamoDB's Limit). 0 lets a request read
// up to DynamoDB's 1 MB. Reads are eventually consistent, as scans are.
//
// The records come without their responses. A request leaves them out so
// that listing does not transfer them. [Store.Get] reads a whole record.
// An item that does not decode as a record fails List.
func (s *Store) List(ctx context.Context, keyPrefix string, pageSize int, page func([]*persistence.Record) error) error {
	client, ok := s.client.(listClient)
	if !ok {
		return fmt.Errorf("persistence/dynamodb: List: the store's client, a %T, cannot Query and Scan", s.client)
	}
	if pageSize < 0 {
		return fmt.Errorf("persistence/dynamodb: List: negative page size %d", pageSize)
	}
	req := &listRequest{keyPrefix: keyPrefix, names: map[string]string{}}
	var projection []string
	for _, n := range s.listedAttrs() {
		p := "#a" + strconv.Itoa(len(projection))
		req.names[p] = n
		projection = append(projection, p)
	}
	req.projection = strings.Join(projection, ", ")
	if pageSize > 0 {
		limit := int32(min(pageSize, 1<<30))
		req.limit = &limit
	}
	next := s.scanPage
	if s.opts.SortKeyAttr != "" {
		next = s.queryPage
	}
	for {
		items, last, err := next(ctx, client, req)
		if err != nil {
			return fmt.Errorf("persistence/dynamodb: listing table %q: %w", s.table, err)
		}
		recs := make([]*persistence.Record, 0, len(items))
		for _, item := range items {
			rec, err := s.decode(item)
			if err != nil {
				return err
			}
			recs = append(recs, rec)
		}
		if err := page(recs); err != nil {
			return err
		}
		if len(last) == 0 {
			return nil
		}
		req.start = last
	}
}

// listedAttrs are the attributes List reads: the key attributes and every
// attribute of a record but the response.
func (s *Store) listedAttrs() []string {
	attrs := []string{s.opts.KeyAttr}
	if s.opts.SortKeyAttr != "" {
		attrs = append(attrs, s.opts.SortKeyAttr)
	}
	for i, n := range s.names {
		if i != attrData && i != attrDataEncoding {
			attrs = append(attrs, n)
		}
	}
	return attrs
}

// listRequest is what List asks each page for.
type listRequest struct {
	keyPrefix  string
	names      map[string]string // the projection's
	projection string
	limit      *int32
	start      map[string]types.AttributeValue // the last page's last key
}

func (s *Store) scanPage(ctx context.Context, client listClient, req *listRequest) ([]map[string]types.AttributeValue, map[string]types.AttributeValue, error) {
	in := &dynamodb.ScanInput{
		TableName:                &s.table,
		ProjectionExpression:     &req.projection,
		ExpressionAttributeNames: req.names,
		Limit:                    req.limit,
		ExclusiveStartKey:        req.start,
	}
	if req.keyPrefix != "" {
		in.ExpressionAttributeNames = withName(req.names, "#key", s.opts.KeyAttr)
		in.FilterExpression = aws.String("begins_with(#key, :prefix)")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prefix": str(req.keyPrefix)}
	}
	out, err := client.Scan(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	return out.Items, out.LastEvaluatedKey, nil
}

func (s *Store) queryPage(ctx context.Context, client listClient, req *listRequest) ([]map[string]types.AttributeValue, map[string]types.AttributeValue, error) {
	cond := "#pk = :pk"
	names := withName(req.names, "#pk", s.opts.KeyAttr)
	values := map[string]types.AttributeValue{":pk": s.staticPK}
	if req.keyPrefix != "" {
		cond += " AND begins_with(#sk, :prefix)"
		names["#sk"] = s.opts.SortKeyAttr
		values[":prefix"] = str(req.keyPrefix)
	}
	out, err := client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    &cond,
		ProjectionExpression:      &req.projection,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		Limit:                     req.limit,
		ExclusiveStartKey:         req.start,
	})
	if err != nil {
		return nil, nil, err
	}
	return out.Items, out.LastEvaluatedKey, nil
}

// withName returns a copy of names with placeholder p for attribute name.
func withName(names map[string]string, p, name string) map[string]string {
	out := maps.Clone(names)
	out[p] = name
	return out
}

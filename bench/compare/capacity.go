package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// capacitySizes are the sizes of the responses the capacity phase stores,
// in bytes (testevents.OrdersResponse).
var capacitySizes = []int{100, 2 << 10, 8 << 10, 16 << 10, 300 << 10}

// capacityRow is the capacity units one call consumes on each side, by
// response size: a first call (reservation and completion) and a replay.
type capacityRow struct {
	Size   int           `json:"size"`
	Ours   capacityUnits `json:"ours"`
	Theirs capacityUnits `json:"theirs"`
}

type capacityUnits struct {
	First  float64 `json:"first"`
	Replay float64 `json:"replay"`
}

// withConsumedCapacity returns the body of a request of op with
// ReturnConsumedCapacity TOTAL, so that its answer says what it consumed.
func withConsumedCapacity(op string, body []byte) []byte {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "GetItem", "TransactWriteItems":
	default:
		return body
	}
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return body
	}
	req["ReturnConsumedCapacity"] = json.RawMessage(`"TOTAL"`)
	b, err := json.Marshal(req)
	if err != nil {
		return body
	}
	return b
}

// consumed returns the capacity units an answer reports. A failed
// conditional write reports none, though DynamoDB charges it: by AWS's
// documented rule, a write unit per KB of the existing item, which the
// answer carries when the request asked for ALL_OLD (both sides do).
func consumed(status int, body []byte) float64 {
	var resp struct {
		ConsumedCapacity json.RawMessage
		Type             string `json:"__type"`
		Item             map[string]map[string]json.RawMessage
	}
	if json.Unmarshal(body, &resp) != nil {
		return 0
	}
	if status != http.StatusOK {
		if strings.HasSuffix(resp.Type, "ConditionalCheckFailedException") && resp.Item != nil {
			return max(1, math.Ceil(float64(itemSize(resp.Item))/1024))
		}
		return 0
	}
	type cc struct{ CapacityUnits float64 }
	var one cc
	if json.Unmarshal(resp.ConsumedCapacity, &one) == nil {
		return one.CapacityUnits
	}
	var many []cc
	_ = json.Unmarshal(resp.ConsumedCapacity, &many)
	total := 0.0
	for _, c := range many {
		total += c.CapacityUnits
	}
	return total
}

// itemSize is the size DynamoDB counts for an item in its JSON wire form:
// the names of its attributes and their values (see valueSize).
func itemSize(item map[string]map[string]json.RawMessage) int {
	n := 0
	for name, av := range item {
		n += len(name) + valueSize(av)
	}
	return n
}

// valueSize is the size DynamoDB documents for a value in its JSON wire
// form: a string's or a binary's length, 1 for a boolean or null, 1 byte
// per 2 significant digits of a number plus 1, the sum of a set's members,
// and for a list or a map 3 bytes, plus 1 per element, plus the elements
// (and a map's names). Powertools stores a response as a map.
func valueSize(av map[string]json.RawMessage) int {
	n := 0
	for typ, raw := range av {
		var (
			s    string
			ss   []string
			list []map[string]json.RawMessage
			m    map[string]map[string]json.RawMessage
		)
		switch typ {
		case "S":
			_ = json.Unmarshal(raw, &s)
			n += len(s)
		case "B":
			_ = json.Unmarshal(raw, &s)
			n += base64.StdEncoding.DecodedLen(len(s)) - strings.Count(s, "=")
		case "N":
			_ = json.Unmarshal(raw, &s)
			n += numberSize(s)
		case "BOOL", "NULL":
			n++
		case "SS", "NS", "BS":
			_ = json.Unmarshal(raw, &ss)
			for _, v := range ss {
				n += valueSize(map[string]json.RawMessage{typ[:1]: json.RawMessage(strconv.Quote(v))})
			}
		case "L":
			_ = json.Unmarshal(raw, &list)
			n += 3 + len(list)
			for _, v := range list {
				n += valueSize(v)
			}
		case "M":
			_ = json.Unmarshal(raw, &m)
			n += 3 + len(m) + itemSize(m)
		}
	}
	return n
}

// numberSize is the size of a number: 1 byte per 2 significant digits,
// plus 1.
func numberSize(s string) int {
	digits := strings.Trim(strings.ReplaceAll(strings.TrimLeft(s, "-"), ".", ""), "0")
	return (len(digits)+1)/2 + 1
}

// measureCapacity makes, on each side, a first call and a replay of a
// handler that returns each of capacitySizes, and returns the units the
// proxy saw each consume.
func measureCapacity(px *proxy, sides []*driverProc, body func(int) string) ([]capacityRow, error) {
	px.meter(true)
	defer px.meter(false)
	var rows []capacityRow
	for _, size := range capacitySizes {
		row := capacityRow{Size: size}
		for i, d := range sides {
			units := [2]float64{}
			tag := fmt.Sprintf("capacity-%d-%d", size, i)
			for j := range units {
				before := px.units()
				if _, err := d.call(command{Op: "call", phaseCmd: phaseCmd{Store: "dynamodb", Tag: tag, Body: body(size)}}); err != nil {
					return nil, err
				}
				units[j] = px.units() - before
			}
			u := capacityUnits{First: units[0], Replay: units[1]}
			if i == 0 {
				row.Ours = u
			} else {
				row.Theirs = u
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

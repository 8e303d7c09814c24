package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// proxy is an HTTP reverse proxy in front of the DynamoDB-compatible server
// that counts the requests it forwards, by operation (the X-Amz-Target
// header), whichever client sends them: both sides are counted by the same
// code.
//
// With allOld set it also does what dynalite does not and DynamoDB does: a
// PutItem that asked for ReturnValuesOnConditionCheckFailure ALL_OLD and
// failed its condition gets the existing item in its error. It reads the
// item with a GetItem of its own, which it does not count, so that the
// counts are those DynamoDB would see. Both libraries ask for ALL_OLD.
type proxy struct {
	upstream string // base URL, such as http://127.0.0.1:8000
	keyAttrs []string
	allOld   bool
	client   *http.Client

	mu     sync.Mutex
	counts map[string]int
	bytes  int // request bodies, every operation
	// metering asks every request for its consumed capacity, and
	// consumedUnits adds it up (capacity.go).
	metering      bool
	consumedUnits float64

	srv *http.Server
	ln  net.Listener
}

// newProxy starts a proxy on a free loopback port. keyAttrs are the key
// attributes of the tables it serves, for the ALL_OLD reads.
func newProxy(upstream string, keyAttrs []string, allOld bool) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{
		upstream: strings.TrimSuffix(upstream, "/"),
		keyAttrs: keyAttrs,
		allOld:   allOld,
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     time.Minute,
		}},
		counts: make(map[string]int),
		ln:     ln,
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's base URL.
func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy.
func (p *proxy) Close() error {
	p.client.CloseIdleConnections()
	return p.srv.Close()
}

// Snapshot returns the requests forwarded so far, by operation.
func (p *proxy) Snapshot() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

// meter turns the metering of consumed capacity on or off.
func (p *proxy) meter(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.metering = on
}

// units returns the capacity units consumed by the requests metered so far.
func (p *proxy) units() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.consumedUnits
}

// Bytes returns the size of the request bodies forwarded so far: what the
// clients sent, before the server answers.
func (p *proxy) Bytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

// operation returns the DynamoDB operation of a request, such as "PutItem".
func operation(r *http.Request) string {
	t := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		return t[i+1:]
	}
	if t == "" {
		return "(none)"
	}
	return t
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := operation(r)
	p.mu.Lock()
	p.counts[op]++
	p.mu.Unlock()

	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	p.mu.Lock()
	p.bytes += len(body)
	metering := p.metering
	p.mu.Unlock()
	if metering {
		body = withConsumedCapacity(op, body)
	}
	status, header, respBody, err := p.forward(r.Method, r.URL.RequestURI(), r.Header, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if p.allOld && op == "PutItem" && status == http.StatusBadRequest {
		if b, ok := p.withOldItem(r.Header, body, respBody); ok {
			respBody = b
			header.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(b)), 10))
		}
	}
	if metering {
		units := consumed(status, respBody)
		p.mu.Lock()
		p.consumedUnits += units
		p.mu.Unlock()
	}
	for k, vs := range header {
		if k == "Content-Length" {
			continue
		}
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(respBody)))
	w.WriteHeader(status)
	_, _ = w.Write(respBody)
}

func (p *proxy) forward(method, uri string, header http.Header, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(method, p.upstream+uri, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for k, vs := range header {
		if k == "Content-Length" || k == "Connection" {
			continue
		}
		req.Header[k] = vs
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// withOldItem returns the error body of a failed conditional PutItem with
// the existing item added, when the request asked for it.
func (p *proxy) withOldItem(header http.Header, reqBody, errBody []byte) ([]byte, bool) {
	var errResp map[string]json.RawMessage
	if json.Unmarshal(errBody, &errResp) != nil {
		return nil, false
	}
	var typ string
	_ = json.Unmarshal(errResp["__type"], &typ)
	if !strings.HasSuffix(typ, "ConditionalCheckFailedException") {
		return nil, false
	}
	var put struct {
		TableName                           string
		Item                                map[string]json.RawMessage
		ReturnValuesOnConditionCheckFailure string
	}
	if json.Unmarshal(reqBody, &put) != nil || put.ReturnValuesOnConditionCheckFailure != "ALL_OLD" {
		return nil, false
	}
	key := make(map[string]json.RawMessage, len(p.keyAttrs))
	for _, a := range p.keyAttrs {
		key[a] = put.Item[a]
	}
	get, _ := json.Marshal(map[string]any{"TableName": put.TableName, "Key": key, "ConsistentRead": true})
	h := http.Header{}
	h.Set("Content-Type", header.Get("Content-Type"))
	h.Set("Authorization", header.Get("Authorization"))
	h.Set("X-Amz-Date", header.Get("X-Amz-Date"))
	h.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	status, _, b, err := p.forward(http.MethodPost, "/", h, get)
	if err != nil || status != http.StatusOK {
		return nil, false
	}
	var out struct{ Item json.RawMessage }
	if json.Unmarshal(b, &out) != nil || len(out.Item) == 0 {
		return nil, false
	}
	errResp["Item"] = out.Item
	b, err = json.Marshal(errResp)
	return b, err == nil
}

// perOp divides the requests between two snapshots by calls, by operation,
// and in total.
func perOp(before, after map[string]int, calls int) (total float64, ops map[string]float64) {
	ops = make(map[string]float64)
	for op, n := range after {
		if d := n - before[op]; d > 0 {
			ops[op] = float64(d) / float64(calls)
			total += ops[op]
		}
	}
	return total, ops
}

func (p *proxy) String() string { return fmt.Sprintf("proxy %s -> %s", p.URL(), p.upstream) }

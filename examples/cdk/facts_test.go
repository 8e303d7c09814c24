package main

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The facts that the SAM template and the CDK app must agree on. SAM and the
// CDK name resources and shape policies differently, so the facts use the
// names of template.yaml (a CDK resource's name is its construct ID, from
// the aws:cdk:path metadata), sets instead of ordered lists, and SAM's
// defaults made explicit.
type facts struct {
	Tables    map[string]tableFacts
	Functions map[string]functionFacts
	Queues    map[string]queueFacts
	Outputs   map[string]string // name: value as text, and description
}

type tableFacts struct {
	Keys           []string // "name HASH S", in key schema order
	BillingMode    string
	TTL            string // attribute, "" without TTL
	DeletionPolicy string
}

type functionFacts struct {
	Code          string // the example directory the code comes from
	Description   string
	Runtime       string
	Architectures []string
	Handler       string
	Timeout       int
	MemorySize    int
	Environment   map[string]string   // variable: the resource whose name it holds
	Access        map[string][]string // resource: the actions allowed on it, sorted
	Routes        []route
	QueueSources  []queueSource
}

type route struct {
	Key           string // "POST /payments"
	PayloadFormat string
}

type queueSource struct {
	Queue         string
	BatchSize     int
	ResponseTypes []string
}

type queueFacts struct {
	VisibilityTimeout int
	RetentionPeriod   int
	DeadLetterQueue   string
	MaxReceiveCount   int
	DeletionPolicy    string
}

// tableAccess returns f with Access restricted to the tables: SAM grants a
// queue consumer its SQS permissions through a managed policy outside the
// template, the CDK through a statement on the queue.
func (f facts) tableAccess() facts {
	for name, fn := range f.Functions {
		access := map[string][]string{}
		for res, actions := range fn.Access {
			if _, ok := f.Tables[res]; ok {
				access[res] = actions
			}
		}
		fn.Access = access
		f.Functions[name] = fn
	}
	return f
}

// parseCFNYAML parses a CloudFormation template in YAML into the same shape
// as JSON, turning the short forms of intrinsic functions (!Ref, !GetAtt,
// !Sub, ...) into their long forms.
func parseCFNYAML(src []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	v, err := cfnValue(&doc)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("template is not a mapping")
	}
	return m, nil
}

func cfnValue(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		return cfnValue(n.Content[0])
	case yaml.AliasNode:
		return cfnValue(n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			val, err := cfnValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := cfnValue(c)
			if err != nil {
				return nil, err
			}
			l = append(l, val)
		}
		v = l
	case yaml.ScalarNode:
		if isShortForm(n.Tag) {
			v = n.Value // the tag is not a YAML type: the value is text
		} else if err := n.Decode(&v); err != nil {
			return nil, err
		}
	}
	if !isShortForm(n.Tag) {
		return v, nil
	}
	switch name := n.Tag[1:]; name {
	case "Ref", "Condition":
		return map[string]any{name: v}, nil
	case "GetAtt":
		// !GetAtt Resource.Attribute, or the list form.
		if s, ok := v.(string); ok {
			res, attr, ok := strings.Cut(s, ".")
			if !ok {
				return nil, fmt.Errorf("line %d: !GetAtt %q needs Resource.Attribute", n.Line, s)
			}
			v = []any{res, attr}
		}
		return map[string]any{"Fn::GetAtt": v}, nil
	default:
		return map[string]any{"Fn::" + name: v}, nil
	}
}

// isShortForm tells a CloudFormation tag (!Ref) from a YAML one (!!str).
func isShortForm(tag string) bool {
	return strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!")
}

// extractor turns a template into facts. names maps logical IDs to the
// names facts use; assetCode maps a CDK asset's S3 key to its example.
type extractor struct {
	resources map[string]map[string]any
	names     map[string]string
	assetCode map[string]string
	errs      []error
}

func (x *extractor) fail(format string, args ...any) {
	x.errs = append(x.errs, fmt.Errorf(format, args...))
}

func newExtractor(tmpl map[string]any) *extractor {
	x := &extractor{resources: map[string]map[string]any{}, names: map[string]string{}}
	for id, r := range asMap(tmpl["Resources"]) {
		x.resources[id] = asMap(r)
		x.names[id] = id
	}
	return x
}

// samFacts extracts the facts of a SAM template.
func samFacts(tmpl map[string]any) (facts, error) {
	x := newExtractor(tmpl)
	// The HTTP API that SAM creates for HttpApi events without an ApiId.
	x.names["ServerlessHttpApi"] = "HttpApi"
	f := x.common(tmpl)

	globals := asMap(asMap(tmpl["Globals"])["Function"])
	for id, r := range x.resources {
		if r["Type"] != "AWS::Serverless::Function" {
			continue
		}
		props := merge(globals, asMap(r["Properties"]))
		fn := x.function(props)
		fn.Code = path.Base(strings.TrimSuffix(asString(props["CodeUri"]), "/"))
		for _, p := range asList(props["Policies"]) {
			stmts, ok := asMap(p)["Statement"]
			if !ok {
				x.fail("%s: only inline policy statements are understood, not %v", id, p)
				continue
			}
			x.statements(fn.Access, stmts)
		}
		for name, e := range asMap(props["Events"]) {
			e := asMap(e)
			ep := asMap(e["Properties"])
			switch e["Type"] {
			case "HttpApi":
				if _, ok := ep["ApiId"]; ok {
					x.fail("%s: event %s: only the implicit HTTP API is understood", id, name)
				}
				format := asString(ep["PayloadFormatVersion"])
				if format == "" {
					format = "2.0" // SAM's default for HttpApi events
				}
				fn.Routes = append(fn.Routes, route{Key: asString(ep["Method"]) + " " + asString(ep["Path"]), PayloadFormat: format})
			case "SQS":
				fn.QueueSources = append(fn.QueueSources, queueSource{
					Queue:         x.ref(ep["Queue"]),
					BatchSize:     asInt(ep["BatchSize"]),
					ResponseTypes: sortedStrings(ep["FunctionResponseTypes"]),
				})
			default:
				x.fail("%s: event %s of type %v is not understood", id, name, e["Type"])
			}
		}
		f.Functions[x.names[id]] = fn
	}
	return f, errors.Join(x.errs...)
}

// cdkFacts extracts the facts of a template that the CDK synthesized with
// path metadata. assetCode maps each function's S3 key to its example.
func cdkFacts(tmpl map[string]any, assetCode map[string]string) (facts, error) {
	x := newExtractor(tmpl)
	x.assetCode = assetCode
	for id, r := range x.resources {
		p := strings.Split(asString(asMap(r["Metadata"])["aws:cdk:path"]), "/")
		if len(p) < 2 {
			x.fail("%s has no aws:cdk:path metadata", id)
			continue
		}
		x.names[id] = p[1] // Stack/ConstructID/...
	}
	f := x.common(tmpl)

	// Each role's policies, and the API's integrations.
	policies := map[string][]any{}
	integrations := map[string]map[string]any{}
	for id, r := range x.resources {
		props := asMap(r["Properties"])
		switch r["Type"] {
		case "AWS::IAM::Policy":
			for _, role := range asList(props["Roles"]) {
				policies[x.logicalRef(role)] = append(policies[x.logicalRef(role)], asMap(props["PolicyDocument"])["Statement"])
			}
		case "AWS::ApiGatewayV2::Integration":
			integrations[id] = props
		}
	}

	byLogicalID := map[string]*functionFacts{}
	for id, r := range x.resources {
		if r["Type"] != "AWS::Lambda::Function" {
			continue
		}
		props := asMap(r["Properties"])
		fn := x.function(props)
		key := asString(asMap(props["Code"])["S3Key"])
		if fn.Code = x.assetCode[key]; fn.Code == "" {
			x.fail("%s: code %q is none of the examples", id, key)
		}
		for _, stmts := range policies[x.logicalRef(props["Role"])] {
			x.statements(fn.Access, stmts)
		}
		byLogicalID[id] = &fn
	}
	for id, r := range x.resources {
		props := asMap(r["Properties"])
		switch r["Type"] {
		case "AWS::ApiGatewayV2::Route":
			// Target: "integrations/" joined with a Ref to the integration.
			parts := asList(asList(asMap(props["Target"])["Fn::Join"]))
			var integ map[string]any
			if len(parts) == 2 && len(asList(parts[1])) == 2 && asList(parts[1])[0] == "integrations/" {
				integ = integrations[x.logicalRef(asList(parts[1])[1])]
			}
			fn := byLogicalID[x.logicalRef(integ["IntegrationUri"])]
			if fn == nil {
				x.fail("%s: route %v does not integrate a function of the stack", id, props["RouteKey"])
				continue
			}
			fn.Routes = append(fn.Routes, route{Key: asString(props["RouteKey"]), PayloadFormat: asString(integ["PayloadFormatVersion"])})
		case "AWS::Lambda::EventSourceMapping":
			fn := byLogicalID[x.logicalRef(props["FunctionName"])]
			if fn == nil {
				x.fail("%s: event source of no function of the stack", id)
				continue
			}
			fn.QueueSources = append(fn.QueueSources, queueSource{
				Queue:         x.ref(props["EventSourceArn"]),
				BatchSize:     asInt(props["BatchSize"]),
				ResponseTypes: sortedStrings(props["FunctionResponseTypes"]),
			})
		}
	}
	for id, fn := range byLogicalID {
		f.Functions[x.names[id]] = *fn
	}
	return f, errors.Join(x.errs...)
}

// common extracts the facts that are plain CloudFormation in both
// templates: tables, queues and outputs.
func (x *extractor) common(tmpl map[string]any) facts {
	f := facts{
		Tables:    map[string]tableFacts{},
		Functions: map[string]functionFacts{},
		Queues:    map[string]queueFacts{},
		Outputs:   map[string]string{},
	}
	for id, r := range x.resources {
		props := asMap(r["Properties"])
		deletion := asString(r["DeletionPolicy"])
		if deletion == "" {
			deletion = "Delete" // CloudFormation's default
		}
		switch r["Type"] {
		case "AWS::DynamoDB::Table":
			types := map[string]string{}
			for _, a := range asList(props["AttributeDefinitions"]) {
				types[asString(asMap(a)["AttributeName"])] = asString(asMap(a)["AttributeType"])
			}
			t := tableFacts{BillingMode: asString(props["BillingMode"]), DeletionPolicy: deletion}
			for _, k := range asList(props["KeySchema"]) {
				name := asString(asMap(k)["AttributeName"])
				t.Keys = append(t.Keys, name+" "+asString(asMap(k)["KeyType"])+" "+types[name])
			}
			if ttl := asMap(props["TimeToLiveSpecification"]); ttl["Enabled"] == true {
				t.TTL = asString(ttl["AttributeName"])
			}
			f.Tables[x.names[id]] = t
		case "AWS::SQS::Queue":
			redrive := asMap(props["RedrivePolicy"])
			f.Queues[x.names[id]] = queueFacts{
				VisibilityTimeout: asInt(props["VisibilityTimeout"]),
				RetentionPeriod:   asInt(props["MessageRetentionPeriod"]),
				DeadLetterQueue:   x.ref(redrive["deadLetterTargetArn"]),
				MaxReceiveCount:   asInt(redrive["maxReceiveCount"]),
				DeletionPolicy:    deletion,
			}
		}
	}
	for name, o := range asMap(tmpl["Outputs"]) {
		o := asMap(o)
		f.Outputs[name] = fmt.Sprintf("%s (%s)", endpoint.ReplaceAllString(x.text(o["Value"]), "${$1.ApiEndpoint}"), asString(o["Description"]))
	}
	return f
}

// endpoint is an HTTP API's URL written out, as SAM templates do; the CDK
// uses the API's ApiEndpoint attribute, which is that URL.
var endpoint = regexp.MustCompile(`https://\$\{(\w+)\}\.execute-api\.\$\{AWS::Region\}\.\$\{AWS::URLSuffix\}`)

// function extracts the facts that come from a function's own properties.
func (x *extractor) function(props map[string]any) functionFacts {
	fn := functionFacts{
		Description:   asString(props["Description"]),
		Runtime:       asString(props["Runtime"]),
		Architectures: sortedStrings(props["Architectures"]),
		Handler:       asString(props["Handler"]),
		Timeout:       asInt(props["Timeout"]),
		MemorySize:    asInt(props["MemorySize"]),
		Environment:   map[string]string{},
		Access:        map[string][]string{},
	}
	for name, v := range asMap(asMap(props["Environment"])["Variables"]) {
		fn.Environment[name] = x.ref(v)
	}
	return fn
}

// statements adds the actions that the policy statements stmts allow to
// access, by resource name.
func (x *extractor) statements(access map[string][]string, stmts any) {
	for _, s := range asList(stmts) {
		s := asMap(s)
		for k := range s {
			if k != "Effect" && k != "Action" && k != "Resource" {
				x.fail("policy statement %v: %s is not understood", s, k)
			}
		}
		if s["Effect"] != "Allow" {
			x.fail("policy statement %v: only Allow is understood", s)
		}
		resources := s["Resource"]
		if _, ok := resources.([]any); !ok {
			resources = []any{resources}
		}
		for _, r := range asList(resources) {
			name := x.ref(r)
			if name == "" {
				name = x.text(r) // "*", an ARN pattern: kept for the tests to see
			}
			access[name] = sortedSet(append(slices.Clone(access[name]), asStrings(s["Action"])...))
		}
	}
}

// ref returns the name of the resource that v refers to with Ref or
// Fn::GetAtt (its Arn, say), or "" if v is not such a reference.
func (x *extractor) ref(v any) string {
	if id := x.logicalRef(v); id != "" {
		if name, ok := x.names[id]; ok {
			return name
		}
		x.fail("reference to %s, which is not in the template", id)
	}
	return ""
}

func (x *extractor) logicalRef(v any) string {
	m := asMap(v)
	if len(m) != 1 {
		return ""
	}
	if id, ok := m["Ref"].(string); ok {
		return id
	}
	if ga := asList(m["Fn::GetAtt"]); len(ga) == 2 {
		return asString(ga[0])
	}
	return ""
}

// text renders a value built of strings, Ref, Fn::GetAtt, Fn::Join and
// Fn::Sub as text, with resources by name: "${Name}", "${Name.Attribute}".
func (x *extractor) text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	m := asMap(v)
	switch {
	case m["Ref"] != nil:
		if id := asString(m["Ref"]); strings.HasPrefix(id, "AWS::") {
			return "${" + id + "}"
		}
		return "${" + x.ref(v) + "}"
	case m["Fn::GetAtt"] != nil:
		return "${" + x.ref(v) + "." + asString(asList(m["Fn::GetAtt"])[1]) + "}"
	case m["Fn::Join"] != nil:
		j := asList(m["Fn::Join"])
		var parts []string
		for _, p := range asList(j[1]) {
			parts = append(parts, x.text(p))
		}
		return strings.Join(parts, asString(j[0]))
	case m["Fn::Sub"] != nil:
		return sub.ReplaceAllStringFunc(asString(m["Fn::Sub"]), func(s string) string {
			id, attr, _ := strings.Cut(s[2:len(s)-1], ".")
			if name, ok := x.names[id]; ok {
				id = name
			}
			if attr != "" {
				return "${" + id + "." + attr + "}"
			}
			return "${" + id + "}"
		})
	}
	x.fail("value %v is not understood", v)
	return fmt.Sprint(v)
}

var sub = regexp.MustCompile(`\$\{[^}]+\}`)

// merge returns base with over laid on it, maps merged key by key, as SAM
// applies Globals.
func merge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				v = merge(bm, om)
			}
		}
		out[k] = v
	}
	return out
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func asList(v any) []any         { l, _ := v.([]any); return l }
func asString(v any) string      { s, _ := v.(string); return s }

// asInt reads a number from YAML (int) or JSON (float64).
func asInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	}
	return 0
}

// asStrings reads a string or a list of strings.
func asStrings(v any) []string {
	if s, ok := v.(string); ok {
		return []string{s}
	}
	var out []string
	for _, e := range asList(v) {
		out = append(out, asString(e))
	}
	return out
}

// sortedStrings reads a string or a list of strings as a set.
func sortedStrings(v any) []string { return sortedSet(asStrings(v)) }

func sortedSet(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}

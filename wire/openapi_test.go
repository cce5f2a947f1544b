package wire_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/skipq/skipq/wire"
)

// schema is the part of an OpenAPI schema object the comparison reads.
type schema struct {
	Ref        string             `json:"$ref"`
	AllOf      []schema           `json:"allOf"`
	OneOf      []schema           `json:"oneOf"`
	Properties map[string]*schema `json:"properties"`
	Items      *schema            `json:"items"`
}

// Every body of the API, as the handlers write it (wire) and as
// internal/handlers/openapi.json documents it, must have the same fields, nested
// objects included: a field added in one place only fails here.
func TestWireTypesMatchOpenAPI(t *testing.T) {
	raw, err := os.ReadFile("../internal/handlers/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]*schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	c := comparer{t: t, schemas: doc.Components.Schemas}
	for name, v := range map[string]any{
		"Error": wire.Error{}, "Issue": wire.Issue{},
		"QueueSettings": wire.QueueSettings{}, "Queue": wire.Queue{}, "QueueWithStats": wire.Queue{},
		"QueueStats": wire.QueueStats{}, "QueuePage": wire.QueuePage{}, "PurgeResult": wire.PurgeResult{},
		"SendRequest": wire.SendRequest{}, "SendBatchRequest": wire.SendBatchRequest{},
		"SendResult": wire.SendResult{}, "SendBatchResult": wire.SendBatchResult{},
		"SendEachResult": wire.SendEachResult{}, "SendEachEntry": wire.SendEachEntry{}, "EntryError": wire.EntryError{},
		"ReceiveRequest": wire.ReceiveRequest{}, "Message": wire.Message{}, "ReceiveResult": wire.ReceiveResult{},
		"BrowsedMessage": wire.Message{}, "BrowsedMessagePage": wire.MessagePage{}, "MessagePage": wire.MessagePage{},
		"SettleRequest": wire.SettleRequest{}, "VisibilityRequest": wire.VisibilityRequest{},
		"RequeueRequest": wire.RequeueRequest{}, "SettleResult": wire.SettleResult{},
		"SettleFailure": wire.SettleFailure{}, "VisibilityResult": wire.VisibilityResult{},
		"History":        wire.History{},
		"RedriveRequest": wire.RedriveRequest{}, "RedriveResult": wire.RedriveResult{},
		"RedriveQueueRequest": wire.RedriveQueueRequest{}, "RedriveQueueResult": wire.RedriveQueueResult{},
		"TopicSettings": wire.TopicSettings{}, "TopicSummary": wire.TopicSummary{}, "Topic": wire.Topic{},
		"TopicPage": wire.TopicPage{}, "Subscription": wire.Subscription{}, "TopicFilter": wire.TopicFilter{},
		"SubscribeRequest": wire.SubscribeRequest{}, "PublishRequest": wire.PublishRequest{},
		"PublishResult": wire.PublishResult{}, "PublishBatchResult": wire.PublishBatchResult{},
		"PublishEachResult": wire.PublishEachResult{}, "PublishEachEntry": wire.PublishEachEntry{},
		"TopicMessage": wire.TopicMessage{}, "GroupState": wire.GroupState{},
	} {
		c.compare(name, reflect.TypeOf(v), &schema{Ref: "#/components/schemas/" + name})
	}
}

// optional are fields a wire type carries for some routes only (omitted
// when empty), which the schemas of the other routes do not list.
var optional = map[string][]string{
	"Message": {"state", "visibleAt", "ackedAt"}, // browsing and lookup only
}

type comparer struct {
	t       *testing.T
	schemas map[string]*schema
}

// resolve follows $ref and merges allOf and oneOf (a Go type carries the
// fields of every alternative); name is the last schema named.
func (c comparer) resolve(name string, s *schema) (string, map[string]*schema, *schema) {
	props := map[string]*schema{}
	var items *schema
	var walk func(s *schema)
	walk = func(s *schema) {
		if s.Ref != "" {
			n := strings.TrimPrefix(s.Ref, "#/components/schemas/")
			ref, ok := c.schemas[n]
			if !ok {
				c.t.Fatalf("%s: no schema %s", name, n)
			}
			name = n
			walk(ref)
		}
		for i := range s.AllOf {
			walk(&s.AllOf[i])
		}
		for i := range s.OneOf {
			walk(&s.OneOf[i])
		}
		for k, v := range s.Properties {
			props[k] = v
		}
		if s.Items != nil {
			items = s.Items
		}
	}
	walk(s)
	return name, props, items
}

func (c comparer) compare(path string, typ reflect.Type, s *schema) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	name, props, items := c.resolve(path, s)
	switch {
	case typ == reflect.TypeFor[wire.Time]():
		return
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() != reflect.Uint8:
		if items != nil {
			c.compare(path+"[]", typ.Elem(), items)
		}
		return
	case typ.Kind() != reflect.Struct:
		return
	}
	fields := jsonFields(typ)
	for prop := range props {
		if _, ok := fields[prop]; !ok {
			c.t.Errorf("%s (schema %s): property %q is not in %s", path, name, prop, typ)
		}
	}
	for field, ft := range fields {
		ps, ok := props[field]
		switch {
		case ok:
			c.compare(path+"."+field, ft, ps)
		case !slices.Contains(optional[name], field):
			c.t.Errorf("%s (schema %s): %s.%s is not in the schema", path, name, typ, field)
		}
	}
}

// jsonFields are a struct's JSON member names and types, embedded structs
// flattened.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range typ.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && tag == "":
			embedded := f.Type
			if embedded.Kind() == reflect.Pointer {
				embedded = embedded.Elem()
			}
			for k, v := range jsonFields(embedded) {
				out[k] = v
			}
		case tag == "-" || !f.IsExported():
		case tag != "":
			out[tag] = f.Type
		default:
			out[f.Name] = f.Type
		}
	}
	return out
}

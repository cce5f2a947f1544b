package sqs

import "testing"

func str(v string) *string { return &v }

// The MD5 vectors SQS clients check (docs/SQS.md); all but the last three were recorded from AWS.
func TestAttributesMD5Vectors(t *testing.T) {
	s := func(v string) Attribute { return Attribute{DataType: "String", StringValue: str(v)} }
	cases := []struct {
		attrs map[string]Attribute
		want  string
	}{
		{map[string]Attribute{"General": s("Kenobi"), "Hello": s("There"), "Help.Me": s("Me")}, "4c360f3fdafd970e05fae2f149d997f5"},
		{map[string]Attribute{"General": s("Kenobi"), "Hello": s("There")}, "fca026605781cb4126a1e9044df24232"},
		{map[string]Attribute{"Hello": s("There")}, "a311262e065454b75da111d535b8dacd"},
		{map[string]Attribute{"Hello": s("There"), "Help.Me": s("Me")}, "83fee93c1bcd8b9a5a923ffacdc636c7"},
		{map[string]Attribute{"Foo": s("Bar")}, "ae7155c6026991b6d54b11589678bf9c"},
		{map[string]Attribute{"timestamp": {DataType: "Number", StringValue: str("1493147359900")}}, "235c5c510d26fb653d073faed50ae77c"},
		{map[string]Attribute{"attr1": {DataType: "Binary",
			BinaryValue: []byte("traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01")}}, "8cbe4db156db8a94db8b801b7addb984"},
		{map[string]Attribute{"AWSTraceHeader": s("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")}, "5ae4d5d7636402d80f4eb6d213245a88"},
		{map[string]Attribute{"count": {DataType: "Number.int", StringValue: str("7")},
			"img": {DataType: "Binary.png", BinaryValue: []byte{0x89, 0x50, 0x4e, 0x47}}}, "4c59d69f5cd6e40066255c1b232eb78c"},
		{map[string]Attribute{"b": s("2"), "B": s("1"), "a": s("3")}, "8831725f249bdb3ab13ffae2a737ad84"},
	}
	for i, c := range cases {
		if got := attributesMD5(c.attrs); got != c.want {
			t.Errorf("vector %d: %s, want %s", i, got, c.want)
		}
	}
	if got := attributesMD5(nil); got != "" {
		t.Errorf("no attributes: %q, want none", got)
	}
}

func TestBodyMD5Vectors(t *testing.T) {
	for body, want := range map[string]string{
		"msg": "6e2baaf3b97dbeef01c0043275f9a0e7", "test": "098f6bcd4621d373cade4e832627b4f6",
		"héllo 🌍": "a4115cc10566f0181d01df50100b37ff", "": "d41d8cd98f00b204e9800998ecf8427e",
	} {
		if got := bodyMD5(body); got != want {
			t.Errorf("%q: %s, want %s", body, got, want)
		}
	}
}

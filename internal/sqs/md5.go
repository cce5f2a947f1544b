package sqs

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
)

// Attribute is one SQS message attribute as the JSON protocol carries it
// (BinaryValue is base64 on the wire; encoding/json decodes it). It is
// also how skipq stores them (service.SQSTagKey).
type Attribute struct {
	DataType         string   `json:"DataType"`
	StringValue      *string  `json:"StringValue,omitempty"`
	BinaryValue      []byte   `json:"BinaryValue,omitempty"`
	StringListValues []string `json:"StringListValues,omitempty"`
	BinaryListValues [][]byte `json:"BinaryListValues,omitempty"`
}

// bodyMD5 is MD5OfMessageBody / MD5OfBody: the body's UTF-8 bytes as sent.
func bodyMD5(body string) string {
	sum := md5.Sum([]byte(body))
	return hex.EncodeToString(sum[:])
}

// attributesMD5 is MD5OfMessageAttributes (and of system attributes): the
// names in byte order, each as length-prefixed name and DataType, then a
// transport byte (1 string, 2 binary) and the length-prefixed value. The
// SDKs that verify it (Java, Ruby, PHP) compute exactly this; "" when
// there are no attributes, as AWS omits the member then.
func attributesMD5(attrs map[string]Attribute) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	slices.Sort(names)
	var b []byte
	field := func(v []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	for _, n := range names {
		a := attrs[n]
		field([]byte(n))
		field([]byte(a.DataType))
		if isBinary(a.DataType) {
			b = append(b, 2)
			field(a.BinaryValue)
			continue
		}
		b = append(b, 1)
		v := ""
		if a.StringValue != nil {
			v = *a.StringValue
		}
		field([]byte(v))
	}
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// baseType is a DataType without its custom label ("Number.int" → "Number").
func baseType(dataType string) string {
	t, _, _ := strings.Cut(dataType, ".")
	return t
}

func isBinary(dataType string) bool { return baseType(dataType) == "Binary" }

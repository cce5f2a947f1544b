package service

import "encoding/base64"

// Cursors are opaque to clients: the last key of the previous page, base64url.
func encodeCursor(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}

func decodeCursor(cursor string) (string, error) {
	key, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return "", Invalid(Issue{Path: "cursor", Message: "is not a cursor this server issued"})
	}
	return string(key), nil
}

-- +goose Up
-- SQL and HTTP must accept the same queue names (SPEC §3: no whitespace or
-- control characters). The HTTP side uses Go's unicode.IsSpace and
-- unicode.IsControl; PostgreSQL's [[:space:]] and [[:cntrl:]] follow the
-- database's locale and, in the C locale, know only ASCII: skipq.send
-- accepted 'a<U+00A0>b', a queue that HTTP then refused to address. The
-- classes are now spelled out: every character Go calls a space (ASCII
-- spaces, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
-- U+205F, U+3000) or a control (U+0000-U+001F, U+007F-U+009F).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.check_queue_name(field text, name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM skipq.check(name IS NOT NULL AND octet_length(name) BETWEEN 1 AND 256,
                        field || ' must be 1 to 256 bytes');
    PERFORM skipq.check(name !~ '[\u0001-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000*>/]',
                        field || ' must not contain whitespace, control characters, "*", ">" or "/"');
    PERFORM skipq.check(right(name, 1) <> '.', field || ' must not end with "."');
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.check_queue_name(text, text) FROM PUBLIC;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.check_queue_name(field text, name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM skipq.check(name IS NOT NULL AND octet_length(name) BETWEEN 1 AND 256,
                        field || ' must be 1 to 256 bytes');
    PERFORM skipq.check(name !~ '[[:space:][:cntrl:]*>/]',
                        field || ' must not contain whitespace, control characters, "*", ">" or "/"');
    PERFORM skipq.check(right(name, 1) <> '.', field || ' must not end with "."');
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.check_queue_name(text, text) FROM PUBLIC;

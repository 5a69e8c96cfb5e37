// Package bigquerytest is a recorded-API fake of Google BigQuery's REST
// API, as the exporter's bigquery sink uses it (sink_bigquery_test.go in
// github.com/fanout-go/fanout/exporter). It is not BigQuery, and passing
// against it proves only that the requests are those the API reference
// documents.
//
// No BigQuery emulator installs here: goccy/bigquery-emulator (the one
// that exists) is not on the Go module proxy, and it builds ZetaSQL, a
// C++ library that takes far longer to compile than `make test` may run.
// So the fake implements, from Google's API reference, what the sink
// calls, with the answers and errors the reference shows:
//
//   - OAuth 2.0 for a service account: the token endpoint (token_uri of a
//     key made by [Server.ServiceAccountKey]) takes a JWT bearer grant,
//     checks its RS256 signature, issuer, audience and scope, and issues
//     an access token that every other call must carry;
//   - tabledata.insertAll: rows checked against the table's schema (a
//     field the table lacks: "no such field"; a value of the wrong type:
//     invalid), all rows refused when one is (the others "stopped") unless
//     skipInvalidRows, insertId deduplication, 404 for a missing table or
//     dataset;
//   - datasets.insert (409 when it exists);
//   - jobs.insert of a load job by multipart upload (uploadType=multipart,
//     its configuration then newline-delimited JSON): schema autodetected
//     from the rows (STRING, TIMESTAMP for RFC 3339 strings, INTEGER,
//     FLOAT, BOOLEAN, RECORD, REPEATED), the table created if needed
//     (CREATE_IF_NEEDED), fields added with ALLOW_FIELD_ADDITION, a field
//     whose type changes failing the job (invalid); the job is RUNNING
//     when created and DONE at its first jobs.get, so that a client must
//     poll.
//
// Failures are injected with [Server.FailNext].
package bigquerytest

// Package awstest runs AWS emulators on loopback for the tests of the
// exporter's AWS receivers (github.com/fanout-go/fanout/exporter), and
// provides [Fake], a server of the AWS JSON 1.1 protocol for the services
// that no emulator installed here serves.
//
// # Emulators
//
// [StartFauxqs] runs fauxqs, which serves SQS in the AWS JSON 1.0 protocol
// (the one aws-sdk-go-v2 speaks to SQS) and SNS in the AWS query protocol,
// PublishBatch included, with SNS-to-SQS delivery, so that what a topic
// was sent is read back from a queue subscribed to it. [StartKinesalite]
// runs kinesalite, which serves Kinesis (AWS JSON 1.1). Both are npm
// packages, installed by emulators.sh (embedded in the package; `make
// e2e-binaries` at the repository root runs the same file) with `npm ci`
// from the pinned npm/package-lock.json into the user's cache directory,
// os.UserCacheDir()/fanout-e2e/aws-emulators-<Version> (60 MB, 10 to 30 s
// the first time); [Dir] runs the script when the install is missing, so
// tests never skip for want of it. They need node (20 or later) and npm on
// PATH.
//
// goaws, the Go SQS/SNS emulator, is not used: the version the Go module
// proxy serves (v0.4.5) speaks SQS only in the query protocol, which
// aws-sdk-go-v2 no longer uses, and has no SNS PublishBatch.
//
// An emulator is not the service: it accepts any credentials, and its
// limits and errors are its own. Each checks the requests' shapes as the
// service's model defines them, which is what the tests rely on.
//
// # Fake
//
// Firehose, EventBridge and Systems Manager (OpsCenter) have no emulator
// that installs here. [Fake] stands for them: an httptest server that
// checks each request as the service would receive it (POST /, the
// Content-Type and X-Amz-Target of the AWS JSON 1.1 protocol, a SigV4
// signature recomputed with the test's credentials for the expected
// service and region, and a body decoded strictly into the operation's
// input shape written from the AWS API reference) and answers what the
// test's handler returns, in the protocol's shape (an error as __type and
// message with its HTTP status).
//
// # Build tag
//
// Importing the package installs nothing; calling [Dir], [StartFauxqs] or
// [StartKinesalite] may. Tests that call them belong behind the e2e build
// tag (`//go:build e2e`), which `make test` sets. [Fake] needs nothing
// installed.
package awstest

package exporter

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PubsubConfig configures a pubsub receiver, with kubernetes-event-exporter's
// keys (and timeout and the record's layout): each occurrence is one
// message of a Google Cloud Pub/Sub topic, published with Google's client
// (cloud.google.com/go/pubsub/v2). Credentials are the application
// default credentials (GOOGLE_APPLICATION_CREDENTIALS, the workload
// identity, ...), and PUBSUB_EMULATOR_HOST points the client at an
// emulator, as in kubernetes-event-exporter.
type PubsubConfig struct {
	// GcloudProjectID is the project of the topic.
	GcloudProjectID string `yaml:"gcloud_project_id"`
	// Topic is the topic's ID, or its name (projects/P/topics/T).
	Topic string `yaml:"topic"`
	// CreateTopic creates the topic at the first write if it does not
	// exist (kubernetes-event-exporter creates it at start, and does not
	// start when it exists).
	CreateTopic bool `yaml:"create_topic"`
	// Timeout bounds the publication of a write's messages (default
	// 10 s), the client's retries included.
	Timeout Duration `yaml:"timeout"`
	// Payload is the layout and deDot of the message data.
	Payload `yaml:",inline"`
	// Encode makes each message's data; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`
}

// pubsubTopicID is what Pub/Sub accepts as a topic ID.
var pubsubTopicID = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$`)

func (c *PubsubConfig) validate() []string {
	var p []string
	if c.GcloudProjectID == "" {
		p = append(p, "pubsub.gcloud_project_id is required")
	}
	if id := c.topicID(); !pubsubTopicID.MatchString(id) || strings.HasPrefix(strings.ToLower(id), "goog") {
		p = append(p, fmt.Sprintf("pubsub.topic %q is not a topic ID (3 to 255 letters, digits and - _ . ~ + %%, "+
			"starting with a letter, not with goog) nor a topic name projects/P/topics/ID", c.Topic))
	}
	return append(p, connectionProblems("pubsub", &c.Timeout, nil)...)
}

// topicID returns the topic's ID.
func (c *PubsubConfig) topicID() string {
	if f := strings.Split(c.Topic, "/"); len(f) == 4 && f[0] == "projects" && f[2] == "topics" {
		return f[3]
	}
	return c.Topic
}

// topicName returns the topic's full name.
func (c *PubsubConfig) topicName() string {
	if strings.Count(c.Topic, "/") == 3 {
		return c.Topic
	}
	return "projects/" + c.GcloudProjectID + "/topics/" + c.Topic
}

// PubsubSink publishes occurrences to a Pub/Sub topic, a message each,
// whose attribute idempotency-key is the occurrence's key, so that a
// subscriber can discard what a retry or a crash made the exporter
// publish twice (Pub/Sub delivers at least once in any case).
//
// A message too large for Pub/Sub (10 MB) or that Pub/Sub refuses as
// invalid is [Permanent]; any other failure (a missing topic, missing
// permissions, the service unreachable) is retried by the receiver's
// policy, after the client's own retries. Write is safe for concurrent
// use.
type PubsubSink struct {
	cfg    PubsubConfig
	client *pubsub.Client
	pub    *pubsub.Publisher

	mu      sync.Mutex // guards created
	created bool       // the topic is known to exist (create_topic)

	stop     sync.Once
	closed   chan struct{} // closed once the publisher and the client are
	closeErr error         // the client's, set before closed
}

// NewPubsubSink returns a Pub/Sub sink. It finds the credentials now
// (failing without them, as kubernetes-event-exporter does) and publishes
// nothing until the first write.
func NewPubsubSink(cfg PubsubConfig) (*PubsubSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, errors.New(p[0])
	}
	client, err := pubsub.NewClient(context.Background(), cfg.GcloudProjectID)
	if err != nil {
		return nil, fmt.Errorf("pubsub: %w", err)
	}
	pub := client.Publisher(cfg.topicName())
	pub.PublishSettings.Timeout = time.Duration(cfg.Timeout)
	return &PubsubSink{cfg: cfg, client: client, pub: pub, closed: make(chan struct{})}, nil
}

// Write publishes the batch and waits for every message's result; it
// returns how many, from the start, were published before the first that
// failed. An occurrence that cannot be encoded ends the batch there.
func (s *PubsubSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	if err := s.createTopic(ctx); err != nil {
		return 0, err
	}
	results := make([]*pubsub.PublishResult, 0, len(batch))
	n, encErr := encodeEach(batch, s.cfg.Encode, func(_ int, o *Occurrence, rec []byte) {
		results = append(results, s.pub.Publish(ctx, &pubsub.Message{Data: rec,
			Attributes: map[string]string{"idempotency-key": o.Key()}}))
	})
	for i, r := range results {
		if _, err := r.Get(ctx); err != nil {
			err = fmt.Errorf("pubsub %s: occurrence %s: %w", s.cfg.topicName(), batch[i].Key(), err)
			if errors.Is(err, pubsub.ErrOversizedMessage) || status.Code(err) == codes.InvalidArgument {
				err = Permanent(err)
			}
			return i, err
		}
	}
	return n, encErr
}

// createTopic creates the topic with create_topic, once: a topic that
// exists already is fine.
func (s *PubsubSink) createTopic(ctx context.Context) error {
	if !s.cfg.CreateTopic {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.created {
		return nil
	}
	_, err := s.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: s.cfg.topicName()})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("pubsub: create topic %s: %w", s.cfg.topicName(), err)
	}
	s.created = true
	return nil
}

// Close publishes what is left and closes the client. Every write waits
// for its messages, but one cancelled at the shutdown deadline may leave
// some outstanding, which the publisher waits for up to the timeout: Close
// returns ctx's error when ctx ends first, and the client is closed once
// the publisher is done.
func (s *PubsubSink) Close(ctx context.Context) error {
	s.stop.Do(func() {
		go func() {
			s.pub.Stop()
			s.closeErr = s.client.Close()
			close(s.closed)
		}()
	})
	select {
	case <-s.closed:
		return s.closeErr
	case <-ctx.Done():
		return fmt.Errorf("pubsub %s: close: messages still outstanding: %w", s.cfg.topicName(), ctx.Err())
	}
}

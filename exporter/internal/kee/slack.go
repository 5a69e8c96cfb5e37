// Copied from kubernetes-event-exporter v1.6.1
// (github.com/resmoio/kubernetes-event-exporter, pkg/sinks/slack.go), licensed under
// the Apache License, Version 2.0: see LICENSE in this directory.
// Changes: the package name; kube.EnhancedEvent is this package's; no logging; NewSlackSink takes the Slack client's options (the API's URL).

package kee

import (
	"context"
	"sort"

	"github.com/slack-go/slack"
)

type SlackConfig struct {
	Token      string            `yaml:"token"`
	Channel    string            `yaml:"channel"`
	Message    string            `yaml:"message"`
	Color      string            `yaml:"color"`
	Footer     string            `yaml:"footer"`
	Title      string            `yaml:"title"`
	AuthorName string            `yaml:"author_name"`
	Fields     map[string]string `yaml:"fields"`
}

type SlackSink struct {
	cfg    *SlackConfig
	client *slack.Client
}

func NewSlackSink(cfg *SlackConfig, options ...slack.Option) (Sink, error) {
	return &SlackSink{
		cfg:    cfg,
		client: slack.New(cfg.Token, options...),
	}, nil
}

func (s *SlackSink) Send(ctx context.Context, ev *EnhancedEvent) error {
	channel, err := GetString(ev, s.cfg.Channel)
	if err != nil {
		return err
	}

	message, err := GetString(ev, s.cfg.Message)
	if err != nil {
		return err
	}

	options := []slack.MsgOption{slack.MsgOptionText(message, true)}
	if s.cfg.Fields != nil {
		fields := make([]slack.AttachmentField, 0)
		for k, v := range s.cfg.Fields {
			fieldText, err := GetString(ev, v)
			if err != nil {
				return err
			}

			fields = append(fields, slack.AttachmentField{
				Title: k,
				Value: fieldText,
				Short: false,
			})
		}

		sort.SliceStable(fields, func(i, j int) bool {
			return fields[i].Title < fields[j].Title
		})

		// make slack attachment
		slackAttachment := slack.Attachment{}
		slackAttachment.Fields = fields
		if s.cfg.AuthorName != "" {
			slackAttachment.AuthorName, err = GetString(ev, s.cfg.AuthorName)
			if err != nil {
				return err
			}
		}
		if s.cfg.Color != "" {
			slackAttachment.Color, err = GetString(ev, s.cfg.Color)
			if err != nil {
				return err
			}
		}
		if s.cfg.Title != "" {
			slackAttachment.Title, err = GetString(ev, s.cfg.Title)
			if err != nil {
				return err
			}
		}
		if s.cfg.Footer != "" {
			slackAttachment.Footer, err = GetString(ev, s.cfg.Footer)
			if err != nil {
				return err
			}
		}

		options = append(options, slack.MsgOptionAttachments(slackAttachment))
	}

	_, _, _, err = s.client.SendMessageContext(ctx, channel, options...)
	return err
}

func (s *SlackSink) Close() {
	// No-op
}

package pubsub

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/api/option"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/sinks"
)

// Options are the pubsub sink's options, as written in plugins.yaml, each
// declared here once (see package confschema).
type Options struct {
	// Project is the Google Cloud project that owns the topic.
	Project string `mapstructure:"project" defaultdoc:"required" doc:"the Google Cloud project that owns the topic"`
	// Topic is the topic's id within Project (not its full name).
	Topic string `mapstructure:"topic" defaultdoc:"required" doc:"the topic's id in the project, such as orders (not projects/.../topics/...)"`
	// Endpoint is the host:port of a Pub/Sub emulator or fake, spoken to in
	// plaintext and without credentials; empty is Google's service.
	Endpoint string `mapstructure:"endpoint" doc:"host:port of a Pub/Sub emulator, spoken to in plaintext without credentials; empty: Google's service"`
	// CredentialsFile is the path of a JSON credentials file (a service
	// account key, or a workload identity federation configuration).
	CredentialsFile string `mapstructure:"credentials_file" doc:"path of a JSON credentials file; without it or credentials_json, Application Default Credentials"`
	// CredentialsJSON is the same JSON given inline. It never appears in
	// errors or logs.
	CredentialsJSON confschema.Secret `mapstructure:"credentials_json" doc:"the JSON credentials themselves (a service account key), never logged nor shown"`
	// PublishOptions are timeout, connect_timeout and max_in_flight.
	sinks.PublishOptions `mapstructure:",squash"`
}

// DefaultOptions returns the options a pubsub sink has before its options
// block applies.
func DefaultOptions() Options { return Options{PublishOptions: sinks.DefaultPublishOptions()} }

// topicID is Pub/Sub's rule for a topic id: 3 to 255 characters, starting
// with a letter, of letters, digits and - _ . ~ + %.
var topicID = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$`)

// credentialTypes are the "type" values of JSON credentials the sink
// accepts, as the client library names them.
var credentialTypes = map[string]option.CredentialsType{
	string(option.ServiceAccount):             option.ServiceAccount,
	string(option.AuthorizedUser):             option.AuthorizedUser,
	string(option.ImpersonatedServiceAccount): option.ImpersonatedServiceAccount,
	string(option.ExternalAccount):            option.ExternalAccount,
}

// credentialType returns the type JSON credentials declare, refusing JSON
// that is not credentials. Its errors never quote the JSON.
func credentialType(raw []byte) (option.CredentialsType, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", errors.New("not a JSON object")
	}
	t, ok := credentialTypes[head.Type]
	if !ok {
		return "", fmt.Errorf("type %q is not one of service_account, authorized_user, impersonated_service_account, external_account", head.Type)
	}
	return t, nil
}

// config is Options checked.
type config struct {
	Options
	credType option.CredentialsType // of CredentialsJSON, when set
}

// check checks what decoding cannot and returns the options as the sink
// runs them; it reads no file (configuration checks build every sink).
// Errors name the option at fault and never repeat a secret.
func (o Options) check() (config, error) {
	c := config{Options: o}
	switch {
	case c.Project == "":
		return c, errors.New("option project: is required")
	case strings.ContainsAny(c.Project, "/ "):
		return c, fmt.Errorf("option project: %q is not a project id", c.Project)
	case c.Topic == "":
		return c, errors.New("option topic: is required")
	case !topicID.MatchString(c.Topic) || strings.HasPrefix(c.Topic, "goog"):
		return c, fmt.Errorf("option topic: %q is not a topic id (3-255 letters, digits and -_.~+%%, starting with a letter, not with goog; the project is its own option)", c.Topic)
	case c.CredentialsFile != "" && c.CredentialsJSON != "":
		return c, errors.New("options credentials_file and credentials_json: set at most one of them")
	case c.Endpoint != "" && (c.CredentialsFile != "" || c.CredentialsJSON != ""):
		return c, errors.New("option endpoint: an emulator takes no credentials; remove credentials_file and credentials_json")
	}
	if c.CredentialsJSON != "" {
		t, err := credentialType([]byte(c.CredentialsJSON))
		if err != nil {
			return c, fmt.Errorf("option credentials_json: %w", err)
		}
		c.credType = t
	}
	if err := c.PublishOptions.Check(); err != nil {
		return c, err
	}
	return c, nil
}

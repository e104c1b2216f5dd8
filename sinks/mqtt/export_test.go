package mqtt

// DefaultClientID is defaultClientID, for the tests.
var DefaultClientID = defaultClientID

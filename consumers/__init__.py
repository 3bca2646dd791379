"""Stream consumers and the local Kafka broker used by tests and the demo."""

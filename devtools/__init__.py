"""Development tooling (a local Kafka broker for tests, benchmarks and demos); not installed."""

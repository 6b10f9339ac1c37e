"""Kafka Connect single message transforms and predicates, and the Python callables users plug in."""
